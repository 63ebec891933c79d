#!/usr/bin/env bash
# --quantization fp8 against BF16 on the GPU, each pair in one call (dummy weights at real sizes):
#   1. decode, batch 1, 1024 in / 128 out (`bench latency`): the FP8-weight GEMV reads half the bytes;
#   2. prefill, 8 x 2048 tokens (`bench latency --output-len 2`): W8A8 GEMMs on FP8 tensor cores;
#   3. serving, random 1024 / 128 at 256 concurrent clients (`vireo serve` + `vireo bench serve`);
#   4. decode, batch 8, 1024 in / 128 out: from 3 rows the W8A8 GEMM runs instead of the GEMV.
# Usage: bash benchmarks/fp8_cuda.sh [model (builtin:qwen3-8b)] [num_prompts for 3 (512)] [stages ("1 2 3")]
set -uo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:-builtin:qwen3-8b}
N=${2:-512}
STAGES=${3:-"1 2 3"}
PORT=${PORT:-8194}
V=./build/vireo
L="$V bench latency --model $MODEL --load-format dummy --device cuda --num-iters-warmup 1 --num-iters 3"
for q in none fp8; do
  qa=(); [ "$q" = fp8 ] && qa=(--quantization fp8)
  if [[ " $STAGES " == *" 1 "* ]]; then
    echo "== $q: decode batch 1, 1024 in, 128 out"
    $L "${qa[@]}" --batch-size 1 --input-len 1024 --output-len 128 2>&1 | grep -E "quantization fp8|Avg latency|Decode throughput|Error|error" | head -5
  fi
  if [[ " $STAGES " == *" 4 "* ]]; then
    echo "== $q: decode batch 8, 1024 in, 128 out"
    $L "${qa[@]}" --batch-size 8 --input-len 1024 --output-len 128 2>&1 | grep -E "Avg latency|Decode throughput|Error|error" | head -4
  fi
  if [[ " $STAGES " == *" 2 "* ]]; then
    echo "== $q: prefill 8 x 2048"
    $L "${qa[@]}" --batch-size 8 --input-len 2048 --output-len 2 --max-num-batched-tokens 16384 2>&1 | grep -E "Avg latency|Prefill time|Error|error" | head -4
  fi
done
if [[ " $STAGES " == *" 3 "* ]]; then
  LOG=$(mktemp)
  trap 'kill $SERVER 2>/dev/null || true; rm -f "$LOG"' EXIT
  for q in none fp8; do
    args=(--model "$MODEL" --load-format dummy --port "$PORT" --device cuda --max-num-seqs 256 --max-model-len 4096)
    [ "$q" = fp8 ] && args+=(--quantization fp8)
    $V serve "${args[@]}" > "$LOG" 2>&1 &
    SERVER=$!
    for i in $(seq 400); do curl -sf "localhost:$PORT/health" > /dev/null && break; sleep 1; done
    echo "== $q: serve, random 1024 / 128, 256 clients, $N prompts"
    grep -E "quantization fp8|KV cache" "$LOG" | head -3
    $V bench serve --port "$PORT" --dataset-name random --random-input-len 1024 --random-output-len 128 \
      --num-prompts "$N" --max-concurrency 256 --ignore-eos --seed 1 \
      | grep -E "Output token throughput|Median TTFT|Median TPOT|Failed"
    kill $SERVER; wait $SERVER 2>/dev/null || true
  done
fi
