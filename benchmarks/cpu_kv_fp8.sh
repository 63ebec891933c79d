#!/usr/bin/env bash
# --kv-cache-dtype fp8 on the CPU against the default cache (F32 on the CPU; docs/performance.md, session 39):
# decode step time of the Qwen3-0.6B shape with dummy weights after a long prompt, where the decode attention
# reads the whole context each step; auto / fp8 / auto in a row (this VM kind drifts between minutes).
# Usage: bash benchmarks/cpu_kv_fp8.sh [prompt lengths ("1024")] [model (builtin:qwen3-0.6b)]
set -uo pipefail
cd "$(dirname "$0")/.."
LENS=${1:-"1024"}
MODEL=${2:-builtin:qwen3-0.6b}
for len in $LENS; do
  for kv in auto fp8 auto; do
    printf "prompt %s, kv %-4s: " "$len" "$kv"
    ./build/vireo bench latency --model "$MODEL" --load-format dummy --device cpu --max-model-len 4096 \
      --batch-size 1 --input-len "$len" --output-len 16 --num-iters-warmup 1 --num-iters 3 --kv-cache-dtype "$kv" \
      2>&1 | grep -E "Decode time|Error|error" | head -2
  done
done
