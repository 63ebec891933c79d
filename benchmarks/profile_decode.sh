#!/usr/bin/env bash
# Where a decode step's time goes, on the device (H200): per-kernel GPU time from Nsight Compute
# (ncu, --clock-control none) over a few decode steps, and the engine's host-side phase times
# (VIREO_STEP_TIMING=1) over a longer run. Usage (after unpacking the bundle, see
# docs/contributing.md):  MODEL=builtin:qwen3-0.6b bash benchmarks/profile_decode.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-device-out}"; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.dev/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
MODEL="${MODEL:-builtin:qwen3-0.6b}"
TAG="${TAG:-$(echo "$MODEL" | tr -c 'a-zA-Z0-9.\n' '_')}"
BATCH="${BATCH:-1}"
STEPS="${STEPS:-6}"
V=build/vireo
NCU="${NCU:-$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)}"

# Host phases: 1 x 512 tokens, 1024 in (the engine logs every 256 steps).
VIREO_STEP_TIMING=1 $V bench latency --model "$MODEL" --load-format dummy --device cuda --batch-size "$BATCH" \
  --input-len 1024 --output-len 513 --num-iters-warmup 0 --num-iters 1 > "$OUT/steptime_$TAG.log" 2>&1
echo "step timing $TAG: $(grep -h 'step timing' "$OUT/steptime_$TAG.log" | tail -1)"

if [ -n "$NCU" ]; then
  # 128-token prompt, STEPS decode steps; graphs are profiled node by node.
  "$NCU" --clock-control none --csv --metrics gpu__time_duration.sum \
    $V bench latency --model "$MODEL" --load-format dummy --device cuda --batch-size "$BATCH" \
    --input-len 128 --output-len $((STEPS + 1)) --num-iters-warmup 0 --num-iters 1 > "$OUT/ncu_$TAG.csv" 2> "$OUT/ncu_$TAG.err"
  python3 tools/bench/ncu_summary.py "$OUT/ncu_$TAG.csv" --steps "$((STEPS + 2))" > "$OUT/ncu_$TAG.txt" 2>&1
  head -30 "$OUT/ncu_$TAG.txt"
else
  echo "ncu not found"
fi
