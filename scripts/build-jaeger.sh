#!/usr/bin/env bash
# Build Jaeger v2 (the `jaeger` binary, a trace store built on the OpenTelemetry Collector) from
# its published Go module, github.com/jaegertracing/jaeger/cmd/jaeger, for the tests' real trace
# store. `go install module@version` refuses a module whose go.mod has replace directives (Jaeger's
# has one), so the module is downloaded through the Go module proxy and built in a copy of itself,
# with its own go.mod and go.sum: the dependency versions Jaeger releases with.
# The binary is cached outside the repo, keyed by the version and the build flags, so later runs
# reuse it. Prints the binary's path on the last line of stdout. A cold build (empty Go caches)
# took 5 min 55 s on 2 cores here; see docs/deploy.md.
#
#   SPARK_OTEL_JAEGER_VERSION   Go module version                       [v1.76.0, Jaeger v2.13.0]
#   SPARK_OTEL_CACHE            cache root (shared with the collector)  [~/.cache/spark-otel]
set -euo pipefail
command -v go >/dev/null 2>&1 || export PATH="$PATH:/usr/local/go/bin"
version="${SPARK_OTEL_JAEGER_VERSION:-v1.76.0}"
module="github.com/jaegertracing/jaeger"
cache="${SPARK_OTEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/spark-otel}"
# How the binary is built; part of the cache key, so changing it rebuilds.
ldflags="-s -w -X $module/internal/version.latestVersion=$version"
build_flags="CGO_ENABLED=0 -trimpath -mod=readonly ./cmd/jaeger"
key="$version-$(printf '%s\n%s\n' "$ldflags" "$build_flags" | sha256sum | cut -c1-12)"
out="$cache/jaeger/$key"
bin="$out/jaeger"
if [[ -x "$bin" ]]; then
  echo "$bin"
  exit 0
fi
mkdir -p "$out"
work="$(mktemp -d)"
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
echo "downloading $module@$version" >&2
dir="$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "$module@$version" \
  | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
if [[ -z "$dir" || ! -f "$dir/go.mod" ]]; then
  echo "build-jaeger.sh: go mod download gave no module directory for $module@$version" >&2
  exit 1
fi
# The module cache is read-only; build in a writable copy.
cp -r "$dir" "$work/src"
chmod -R u+w "$work/src"
echo "building jaeger $version (cold builds take several minutes on 2 cores)" >&2
(
  cd "$work/src"
  GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0 go build -trimpath \
    -ldflags="$ldflags" \
    -o "$work/jaeger" ./cmd/jaeger
)
cp "$work/jaeger" "$bin.tmp"
mv "$bin.tmp" "$bin"
echo "$bin"
