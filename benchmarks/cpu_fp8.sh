#!/usr/bin/env bash
# --quantization fp8 on the CPU against BF16 weights (docs/performance.md, session 38): decode step time of the
# Qwen3-0.6B shape with dummy weights, BF16 / FP8 / BF16 in a row (this VM kind drifts between minutes, so the
# baseline runs on both sides), at each batch size given.
# Usage: bash benchmarks/cpu_fp8.sh [batch sizes ("1 6")] [model (builtin:qwen3-0.6b)]
set -uo pipefail
cd "$(dirname "$0")/.."
SIZES=${1:-"1 6"}
MODEL=${2:-builtin:qwen3-0.6b}
for bs in $SIZES; do
  for q in none fp8 none; do
    qa=(); [ "$q" = fp8 ] && qa=(--quantization fp8)
    printf "batch %s, %-4s: " "$bs" "$q"
    ./build/vireo bench latency --model "$MODEL" --load-format dummy --device cpu --max-model-len 4096 \
      --batch-size "$bs" --input-len 32 --output-len 16 --num-iters-warmup 1 --num-iters 3 "${qa[@]}" 2>&1 \
      | grep -E "Decode time|Error|error" | head -2
  done
done
