#!/usr/bin/env bash
# CPU decode latency with GGUF block-quantized linear weights kept packed (cpu_linear_blocks*.cc) against
# the BF16 weights the CPU keeps for a BF16 checkpoint, one process after the other on the same machine
# (docs/performance.md). Dummy weights at the model's real size: VIREO_DUMMY_QUANT=<type> gives random
# packed blocks, unset the BF16 baseline.
#   MODEL=builtin:qwen3-0.6b TYPES="Q8_0 Q6_K Q5_K Q4_K Q4_0" bash benchmarks/cpu_packed_gguf.sh
# Prints, per form, the load log's packed-weights line and bench latency's decode figures.
set -uo pipefail
cd "$(dirname "$0")/.."
V=${VIREO:-build/vireo}
MODEL=${MODEL:-builtin:qwen3-0.6b}
for form in BF16 ${TYPES:-Q8_0 Q6_K Q5_K Q4_K Q4_0}; do
  echo "== $MODEL weights $form"
  q=$form
  [ "$form" = BF16 ] && q=
  VIREO_DUMMY_QUANT=$q "$V" bench latency --model "$MODEL" --load-format dummy --device cpu --max-model-len 2048 \
    --batch-size "${BATCH:-1}" --input-len "${INPUT_LEN:-128}" --output-len "${OUTPUT_LEN:-64}" --num-iters 2 \
    --num-iters-warmup 1 2>&1 | grep -iE "packed weights|decode|error" | tail -4
done
