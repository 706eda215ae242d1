#!/usr/bin/env bash
# Build the spark-otel collector with the official OpenTelemetry Collector Builder (OCB).
# The binary is cached outside the repo, keyed by the manifest's hash, so later runs reuse it.
# Prints the binary's path on the last line of stdout.
set -euo pipefail
command -v go >/dev/null 2>&1 || export PATH="$PATH:/usr/local/go/bin"
here="$(cd "$(dirname "$0")/.." && pwd)"
manifest="$here/collector/builder-config.yaml"
builder_version="v0.161.0"
cache="${SPARK_OTEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/spark-otel}"
key="$(cat "$manifest" | sha256sum | cut -c1-16)-$builder_version"
out="$cache/otelcol/$key"
bin="$out/otelcol-spark"
if [[ -x "$bin" ]]; then
  echo "$bin"
  exit 0
fi
mkdir -p "$out" "$cache/gobin"
export GOBIN="$cache/gobin"
export GOFLAGS="${GOFLAGS:-} -mod=mod"
if [[ ! -x "$GOBIN/builder-$builder_version" ]]; then
  echo "installing OCB builder $builder_version" >&2
  go install -trimpath -ldflags="-s -w" "go.opentelemetry.io/collector/cmd/builder@$builder_version" >&2
  mv "$GOBIN/builder" "$GOBIN/builder-$builder_version"
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
sed "s#output_path: .*#output_path: $work/dist#" "$manifest" > "$work/manifest.yaml"
echo "building otelcol-spark (cold builds take several minutes on 2 cores)" >&2
"$GOBIN/builder-$builder_version" --config "$work/manifest.yaml" >&2
cp "$work/dist/otelcol-spark" "$bin.tmp"
mv "$bin.tmp" "$bin"
echo "$bin"
