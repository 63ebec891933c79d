#!/usr/bin/env bash
# One device call: oracle tests, then kernel benchmarks; logs to $OUT, short table last.
# Here first: build test_cuda_ops / test_cuda_bench, `bash scripts/device_bundle.sh <binaries>`, then
# run with carry [".dev/lib", "build-cuda/tests/test_cuda_ops", "build-cuda/tests/test_cuda_bench"].
# Optional $1: gtest filter for the ops tests; $2: for the benchmarks.
set -uo pipefail
export LD_LIBRARY_PATH=$PWD/.dev/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee "$OUT/gpu.txt"
timeout 300 build-cuda/tests/test_cuda_ops --gtest_brief=1 --gtest_filter="${1:-*}" >"$OUT/ops.log" 2>&1
echo "ops rc=$?"
grep -E "Failure|FAILED|off \(|error|PASSED" "$OUT/ops.log" | cut -c1-400 | head -40
VIREO_KERNEL_BENCH=1 timeout 200 build-cuda/tests/test_cuda_bench --gtest_filter="${2:-*}" >"$OUT/bench.log" 2>&1
echo "bench rc=$?"
grep -E "ceiling|Failure" "$OUT/bench.log"
sed -n '/^kernel /,$p' "$OUT/bench.log"
