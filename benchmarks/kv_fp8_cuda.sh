#!/usr/bin/env bash
# --kv-cache-dtype fp8 against the model-dtype cache on the GPU, each pair in one call (dummy weights):
#   1. offline throughput, random 1024 / 128 at 256 sequences (`bench throughput`): decode rows read half
#      the K / V bytes;
#   2. decode, batch 1, 1024 in / 128 out (`bench latency`): the FP8 cache takes the split mma.sync kernel
#      and a separate qkv_prepare instead of the fused cluster kernel;
#   3. serving, random 1024 / 128 at 256 concurrent clients (`vireo serve` + `vireo bench serve`).
# Usage: bash benchmarks/kv_fp8_cuda.sh [model (builtin:qwen3-0.6b)] [stages ("1 2 3")] [extra flags...]
# e.g. bash benchmarks/kv_fp8_cuda.sh builtin:qwen3-8b "1 3" --quantization fp8
set -uo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:-builtin:qwen3-0.6b}
STAGES=${2:-"1 2 3"}
shift 2 2>/dev/null || shift $#
EXTRA=("$@")
PORT=${PORT:-8195}
V=./build/vireo
for kv in ${KV_DTYPES:-auto fp8}; do
  if [[ " $STAGES " == *" 1 "* ]]; then
    echo "== kv $kv: throughput, random 1024 / 128, 256 sequences, 1024 prompts"
    $V bench throughput --model "$MODEL" --load-format dummy --device cuda --kv-cache-dtype "$kv" "${EXTRA[@]}" \
      --max-num-seqs 256 --max-model-len 4096 --input-len 1024 --output-len 128 --num-prompts "${NUM_PROMPTS:-1024}" \
      2>&1 | grep -E "KV cache:|Throughput|Error|error" | head -4
  fi
  if [[ " $STAGES " == *" 2 "* ]]; then
    echo "== kv $kv: decode batch 1, 1024 in, 128 out"
    $V bench latency --model "$MODEL" --load-format dummy --device cuda --kv-cache-dtype "$kv" "${EXTRA[@]}" \
      --num-iters-warmup 1 --num-iters 3 --batch-size 1 --input-len 1024 --output-len 128 2>&1 |
      grep -E "Avg latency|Decode throughput|Error|error" | head -4
  fi
done
if [[ " $STAGES " == *" 3 "* ]]; then
  LOG=$(mktemp)
  trap 'kill $SERVER 2>/dev/null || true; rm -f "$LOG"' EXIT
  for kv in ${KV_DTYPES:-auto fp8}; do
    $V serve --model "$MODEL" --load-format dummy --port "$PORT" --device cuda --max-num-seqs 256 \
      --max-model-len 4096 --kv-cache-dtype "$kv" "${EXTRA[@]}" > "$LOG" 2>&1 &
    SERVER=$!
    for i in $(seq 400); do curl -sf "localhost:$PORT/health" > /dev/null && break; sleep 1; done
    echo "== kv $kv: serve, random 1024 / 128, 256 clients, 512 prompts"
    grep -E "KV cache:" "$LOG" | head -2
    $V bench serve --port "$PORT" --dataset-name random --random-input-len 1024 --random-output-len 128 \
      --num-prompts 512 --max-concurrency 256 --ignore-eos --seed 1 \
      | grep -E "Output token throughput|Median TTFT|Median TPOT|Failed"
    kill $SERVER; wait $SERVER 2>/dev/null || true
  done
fi
