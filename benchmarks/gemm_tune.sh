#!/usr/bin/env bash
# cuBLASLt FP8 configurations timed per 64-row bucket (VIREO_GEMM_TUNE=1, cublaslt_tune.h) on the device, in
# one call:
#   1. correctness: Fp8LinearTest.TunedConfigurationsMatchTheHost (scaled and unscaled GEMMs, every element);
#   2. the serving GEMMs against the step's rows, tuning off / on / off / on (Fp8Bench.H_RowSweep, 1,536 to
#      3,072 rows in 64-row steps): the per-row cost's sawtooth with the heuristic's pick, flattened by tuning;
#      then the BF16 weights' GEMMs off / on (VIREO_SWEEP_BF16=1);
#   3. serving A/B at BUDGET (default 8192): tuning (with steps trimmed to whole 64-row buckets, which the
#      tuned plans were timed at) against the default, unless SERVE=0.
# Run on the device from the repository root with build/ (vireo, tests/test_cuda_ops, tests/test_cuda_bench);
# OUT: where logs go (default ./device-out/tune); SWEEPS: the FP8 sweeps' tuning settings in turn ("0 1 0 1"; "": none);
# BF16_SWEEPS ("0 1"; "": none); ROWS: the sweeps' row counts (default 1,536 to 3,072 in 64-row steps; e.g.
# "$(seq -s, 4096 512 8192)" for the 512-row buckets past 4,096); SERVE_ENVS: serve_8b_fp8.sh's ENVS.
# Figures: docs/performance.md (session 56 on).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-device-out/tune}
BUDGET=${BUDGET:-8192}
mkdir -p "$OUT"
timeout 60 build/tests/test_cuda_ops --gtest_filter='Fp8LinearTest.Tuned*:LinearTest.Tuned*' --gtest_brief=1 > "$OUT/tests.log" 2>&1
rc=$?
echo "tuned GEMM test: rc=$rc"; grep -E "^\[  (PASSED|FAILED)|elements off" "$OUT/tests.log" | head -4
rows=${ROWS:-$(seq -s, 1536 64 3072)}
for tune in ${SWEEPS-0 1 0 1}; do
  VIREO_GEMM_TUNE=$tune VIREO_SWEEP_ROWS=$rows VIREO_KERNEL_BENCH=1 build/tests/test_cuda_bench \
    --gtest_filter='Fp8Bench.H_RowSweep' > "$OUT/sweep_$tune.log" 2>&1
  echo "== sweep, tune $tune: rows, layer us, us / 16 rows"
  grep "sweep" "$OUT/sweep_$tune.log" | awk '{print $2, $12, $14}' | tr '\n' ';'; echo
done
for tune in ${BF16_SWEEPS-0 1}; do  # the BF16 weights' GEMMs (the default dtype)
  VIREO_GEMM_TUNE=$tune VIREO_SWEEP_BF16=1 VIREO_SWEEP_ROWS=$rows VIREO_KERNEL_BENCH=1 build/tests/test_cuda_bench \
    --gtest_filter='Fp8Bench.H_RowSweep' > "$OUT/sweep_bf16_$tune.log" 2>&1
  echo "== sweep BF16, tune $tune: rows, layer us, us / 16 rows"
  grep "sweep" "$OUT/sweep_bf16_$tune.log" | awk '{print $3, $13, $15}' | tr '\n' ';'; echo
done
if [ "${SERVE:-1}" = 1 ] && [ "$rc" = 0 ]; then
  OUT=$OUT/serve OFFLINE=0 PROMPTS=1000 BUDGETS=$BUDGET ENVS=${SERVE_ENVS:-"VIREO_GEMM_TUNE=1+VIREO_STEP_ALIGN=64 - VIREO_GEMM_TUNE=1"} \
    bash benchmarks/serve_8b_fp8.sh
  grep -h "gemm tune" "$OUT"/serve/serve_*.log | head -3
fi
