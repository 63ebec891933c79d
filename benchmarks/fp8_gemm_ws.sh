#!/usr/bin/env bash
# The W8A8 GEMMs of our own (fp8_gemm_ws.h: cooperative, ping-pong, ping-pong in block pairs) against cuBLASLt
# on the device, in one call:
#   1. correctness: Fp8LinearTest.WsGemmTilesStagesAndEpilogue, the block-pair kernel alone first under a
#      timeout (a barrier mistake hangs rather than fails), then the other two with the FP8-linear cases;
#   2. the kernels alone: Fp8Bench.F_WsGemm at the 8B serving shapes (ROWS, default 2048,8192), interleaved;
#   3. serving A/B at BUDGET (default 8192, the default budget) with VIREO_FP8_GEMM_WS=$KERNEL (default 3:
#      block pairs; 1 cooperative, 2 ping-pong) vs cuBLASLt, unless SERVE=0 or the kernel's test failed;
#   4. ncu's stall view of that kernel (qkv at the first row count) when NCU=1 (scripts/ncu_sass_stalls.py).
# Run on the device from the repository root with build/ (vireo, tests/test_cuda_ops, tests/test_cuda_bench);
# OUT: where logs go (default ./device-out/ws). Figures: docs/cuda_kernels.md (sessions 54-55).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-device-out/ws}
ROWS=${ROWS:-2048,8192}
KERNEL=${KERNEL:-3}
BUDGET=${BUDGET:-8192}
mkdir -p "$OUT"
VIREO_WS_TEST_KERNELS=2 timeout 90 build/tests/test_cuda_ops --gtest_filter='Fp8LinearTest.WsGemm*' --gtest_brief=1 \
  > "$OUT/tests_pairs.log" 2>&1
pairs_rc=$?
echo "block pairs: rc=$pairs_rc"; grep -E "^\[  (PASSED|FAILED)|elements off" "$OUT/tests_pairs.log" | head -4
VIREO_WS_TEST_KERNELS=01 build/tests/test_cuda_ops --gtest_filter='Fp8LinearTest.*' --gtest_brief=1 > "$OUT/tests.log" 2>&1
rc=$?
echo "cooperative, ping-pong, FP8 linears: rc=$rc"; grep -E "^\[  (PASSED|FAILED)|elements off|^/.*: (ping-pong|cooperative)" "$OUT/tests.log" | head
pairs=0; [ $pairs_rc = 0 ] && pairs=1
VIREO_WS_PAIRS=$pairs VIREO_WS_ROWS=$ROWS VIREO_KERNEL_BENCH=1 build/tests/test_cuda_bench --gtest_filter='Fp8Bench.F_WsGemm' \
  > "$OUT/bench.log" 2>&1
grep "ws gemm" "$OUT/bench.log"
ok=$rc; [ "$KERNEL" = 3 ] && ok=$pairs_rc
if [ "${SERVE:-1}" = 1 ] && [ "$ok" = 0 ]; then
  OUT=$OUT/serve OFFLINE=0 PROMPTS=1000 BUDGETS=$BUDGET ENVS="VIREO_FP8_GEMM_WS=$KERNEL -" bash benchmarks/serve_8b_fp8.sh
fi
if [ "${NCU:-0}" = 1 ] && [ "$ok" = 0 ]; then
  NCU_BIN=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  # Mangled names tell the kernels apart: the ping-pong template's second argument is its cluster size.
  name='fp8_gemm_pingpong_kernelI13__nv_bfloat16Li2E'
  [ "$KERNEL" = 2 ] && name='fp8_gemm_pingpong_kernelI13__nv_bfloat16Li1E'
  [ "$KERNEL" = 1 ] && name='fp8_gemm_ws_kernel'
  VIREO_WS_ROWS=${ROWS%%,*} VIREO_KERNEL_BENCH=1 timeout 120 "$NCU_BIN" --clock-control none --kernel-name-base mangled \
    -k "regex:$name" -c 1 \
    --set full --import-source no -f -o "$OUT/ws" build/tests/test_cuda_bench --gtest_filter=Fp8Bench.F_WsGemm \
    > "$OUT/ncu_run.txt" 2>&1
  "$NCU_BIN" -i "$OUT/ws.ncu-rep" --page source --csv --print-source sass > "$OUT/ws_sass.csv" 2>&1
  "$NCU_BIN" -i "$OUT/ws.ncu-rep" --page details > "$OUT/ws_details.txt" 2>&1
  grep -E "Duration|Compute \(SM\) Throughput|L2 Cache Throughput|Issued Warp|Warp Cycles Per Issued" "$OUT/ws_details.txt"
  python3 scripts/ncu_sass_stalls.py "$OUT/ws_sass.csv" 25 | tee "$OUT/ws_stalls.txt" | head -50
fi
