#!/usr/bin/env bash
# N-gram speculative decoding (CPU by default; DEVICE=cuda for the GPU): `vireo bench serve` (sonnet prompts, greedy, one client at a
# time) against two servers of the same model, without drafts and with --speculative-config. With dummy
# weights the gain depends on how often the random model's greedy output repeats itself (it loops, as random
# models do); what it shows is what a kept draft saves: a CPU decode step reads all weights once, for 1 token
# or 5 (on CUDA drafted steps also leave the decode graphs). Usage:
#   [DEVICE=cuda] bash benchmarks/spec_decode_serve.sh [model] [num_prompts] [output_len]
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:-builtin:qwen3-0.6b}
N=${2:-4}
OUT_LEN=${3:-64}
PORT=${PORT:-8192}
SPEC='{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 3, "prompt_lookup_min": 1}'
LOG=$(mktemp)
trap 'kill $SERVER 2>/dev/null || true; rm -f "$LOG"' EXIT
for mode in off on; do
  args=(--model "$MODEL" --load-format dummy --port "$PORT" --max-model-len 2048 --device "${DEVICE:-cpu}")
  [ "$mode" = on ] && args+=(--speculative-config "$SPEC")
  ./build/vireo serve "${args[@]}" > "$LOG" 2>&1 &
  SERVER=$!
  for i in $(seq 300); do curl -sf "localhost:$PORT/health" > /dev/null && break; sleep 1; done
  echo "== speculative decoding $mode"
  ./build/vireo bench serve --port "$PORT" --dataset-name sonnet --sonnet-input-len 256 --sonnet-prefix-len 64 \
    --sonnet-output-len "$OUT_LEN" --num-prompts "$N" --max-concurrency 1 --seed 1 --ignore-eos \
    | grep -E "Output token throughput|Median TTFT|Median TPOT|Median ITL"
  curl -s "localhost:$PORT/metrics" | grep -E "^vllm:spec_decode_num_(drafts|draft_tokens|accepted_tokens)_total" || true
  kill $SERVER; wait $SERVER 2>/dev/null || true
done
