#!/usr/bin/env bash
# The issue-6 serving workload (Qwen3-8B shape, dummy weights, `--quantization fp8 --kv-cache-dtype fp8`):
# offline throughput, then `vireo serve` + `vireo bench serve` (random 1024 / 128, ignore EOS) per token
# budget, each run once per environment in ENVS (an A/B in one device call; "-" = as is).
#   bash benchmarks/serve_8b_fp8.sh                       # offline + serving at budgets 2048 1536, 256 clients
#   SEQS=64 BUDGETS="" ENVS="VIREO_FP8_SMALL_GEMM=0 -" bash benchmarks/serve_8b_fp8.sh
# Env: MODEL (builtin:qwen3-8b), SEQS (256: --max-num-seqs and the client concurrency), PROMPTS (2 x SEQS),
# BUDGETS ("2048 1536"; "" skips serving), OFFLINE (1), ENVS ("-"), PORT (8101), OUT (./device-out), DEVICE (cuda),
# INPUT_LEN (1024), OUTPUT_LEN (128), V (./build/vireo: the binary; an older build gives a same-call baseline),
# QUANT (fp8; "" serves the model's BF16 weights), KV (fp8; auto: the model's dtype).
# Several variables in one entry are joined by "+": ENVS="VIREO_GEMM_TUNE=1+VIREO_STEP_ALIGN=64 -".
# The split mixed steps' A/B: ENVS="VIREO_SPLIT_MIXED=1 -" OFFLINE=0 BUDGETS=2048 (and with QUANT= KV=auto for BF16).
# A smoke run on the CPU: MODEL=builtin:default DEVICE=cpu SEQS=2 INPUT_LEN=32 OUTPUT_LEN=4 BUDGETS=256 bash
# benchmarks/serve_8b_fp8.sh
# PROMPTS=1000 is vllm bench serve's default count (fewer of the run's seconds are ramp and drain than at 512).
# Figures in docs/performance.md (sessions 41-46).
set -uo pipefail
cd "$(dirname "$0")/.."
MODEL=${MODEL:-builtin:qwen3-8b}
SEQS=${SEQS:-256}
PROMPTS=${PROMPTS:-$((2 * SEQS))}
BUDGETS=${BUDGETS-"2048 1536"}
OFFLINE=${OFFLINE:-1}
ENVS=${ENVS:-"-"}
PORT=${PORT:-8101}
OUT=${OUT:-device-out}
DEVICE=${DEVICE:-cuda}
IN=${INPUT_LEN:-1024}
OUTLEN=${OUTPUT_LEN:-128}
mkdir -p "$OUT"
V=${V:-./build/vireo}
QUANT=${QUANT-fp8}
FLAGS=(--model "$MODEL" --load-format dummy --device "$DEVICE" ${QUANT:+--quantization "$QUANT"} --kv-cache-dtype "${KV:-fp8}" --max-model-len 4096
       --max-num-seqs "$SEQS")
with_env() {  # with_env "A=1+B=2" cmd...  ("-": no variables; "+" joins several); exec: in a background subshell, $! is the server
  local e=$1; shift
  if [ "$e" = - ]; then exec "$@"; else exec env ${e//+/ } "$@"; fi
}
for e in $ENVS; do
  tag=$(echo "$e" | tr -c 'A-Za-z0-9\n' '_')
  if [ "$OFFLINE" = 1 ]; then
    echo "== offline, $SEQS sequences, $PROMPTS prompts [$e]"
    (with_env "$e" $V bench throughput "${FLAGS[@]}" --input-len "$IN" --output-len "$OUTLEN" --num-prompts "$PROMPTS") \
      > "$OUT/offline_$tag.log" 2>&1
    grep -E "Throughput|cuda graphs|rror" "$OUT/offline_$tag.log" | tail -3
  fi
  for b in $BUDGETS; do
    echo "== serve, budget $b, $SEQS clients, $PROMPTS prompts [$e]"
    (with_env "$e" $V serve "${FLAGS[@]}" --port "$PORT" --max-num-batched-tokens "$b") > "$OUT/serve_${b}_$tag.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 180); do curl -sf "localhost:$PORT/health" > /dev/null && break; sleep 1; done
    $V bench serve --port "$PORT" --model "$MODEL" --tokenizer models/qwen3 --dataset-name random \
      --random-input-len "$IN" --random-output-len "$OUTLEN" --num-prompts "$PROMPTS" --max-concurrency "$SEQS" --ignore-eos \
      --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,99 --disable-tqdm > "$OUT/bench_${b}_$tag.log" 2>&1
    grep -E "Successful|Output token throughput|Median TTFT|P99 TTFT|Median TPOT|P99 TPOT" "$OUT/bench_${b}_$tag.log"
    kill "$pid"; wait "$pid" 2> /dev/null
  done
done
