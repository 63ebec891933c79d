#!/usr/bin/env bash
# The warp-specialised W8A8 GEMM (fp8_gemm_ws.h) against cuBLASLt on the device, in one call:
#   1. correctness: Fp8LinearTest.WsGemmTilesStagesAndEpilogue (and the other FP8-linear cases);
#   2. the kernel alone: Fp8Bench.F_WsGemm at the 8B serving shapes (ROWS, default 2048,8192);
#   3. serving A/B at budget 2048 (VIREO_FP8_GEMM_WS=1 vs default), unless SERVE=0;
#   4. ncu's stall view of the kernel (qkv at the first row count) when NCU=1 (scripts/ncu_sass_stalls.py).
# Run on the device from the repository root with build/ (vireo, tests/test_cuda_ops, tests/test_cuda_bench);
# OUT: where logs go (default ./device-out/ws). Figures: docs/cuda_kernels.md (session 54 onwards).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-device-out/ws}
ROWS=${ROWS:-2048,8192}
mkdir -p "$OUT"
build/tests/test_cuda_ops --gtest_filter='Fp8LinearTest.*' --gtest_brief=1 > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED|off \(" "$OUT/tests.log" | head
VIREO_WS_ROWS=$ROWS VIREO_KERNEL_BENCH=1 build/tests/test_cuda_bench --gtest_filter='Fp8Bench.F_WsGemm' > "$OUT/bench.log" 2>&1
grep "ws gemm" "$OUT/bench.log"
if [ "${SERVE:-1}" = 1 ]; then
  OUT=$OUT/serve OFFLINE=0 PROMPTS=1000 BUDGETS=2048 ENVS="VIREO_FP8_GEMM_WS=1 -" bash benchmarks/serve_8b_fp8.sh
fi
if [ "${NCU:-0}" = 1 ]; then
  NCU_BIN=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  VIREO_WS_ROWS=${ROWS%%,*} VIREO_KERNEL_BENCH=1 timeout 120 "$NCU_BIN" --clock-control none -k regex:fp8_gemm_ws -c 1 \
    --set full --import-source no -f -o "$OUT/ws" build/tests/test_cuda_bench --gtest_filter=Fp8Bench.F_WsGemm \
    > "$OUT/ncu_run.txt" 2>&1
  "$NCU_BIN" -i "$OUT/ws.ncu-rep" --page source --csv --print-source sass > "$OUT/ws_sass.csv" 2>&1
  "$NCU_BIN" -i "$OUT/ws.ncu-rep" --page details > "$OUT/ws_details.txt" 2>&1
  grep -E "Duration|Compute \(SM\) Throughput|L2 Cache Throughput|Issued Warp|Warp Cycles Per Issued" "$OUT/ws_details.txt"
  python3 scripts/ncu_sass_stalls.py "$OUT/ws_sass.csv" 25 | tee "$OUT/ws_stalls.txt" | head -50
fi
