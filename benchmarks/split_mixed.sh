#!/usr/bin/env bash
# Split mixed steps (VIREO_SPLIT_MIXED=1, docs/cuda_kernels.md): the device run that decides whether they
# become the default. Built here, run there with the binaries in build/ (see benchmarks/run_device.sh):
#   1. correctness: SplitMixedOnCuda.* (with a fixed 50% prefill share, so a tiny model's steps defer);
#   2. OverlapBench: how much of the decode rows' attention one GEMM on another stream hides;
#   3. serving A/B at budget 2048, FP8 (weights and cache) then BF16 (the model's dtype), split then default.
# Env: OUT (./device-out), PROMPTS (512), STAGES ("tests bench fp8 bf16").
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-device-out}
STAGES=${STAGES:-"tests bench fp8 bf16"}
mkdir -p "$OUT"
has() { [[ " $STAGES " == *" $1 "* ]]; }
if has tests; then
  echo "== SplitMixedOnCuda"
  VIREO_ATTN_PREFILL_SM_PCT=50 build/tests/test_cuda_graph --gtest_filter='SplitMixedOnCuda.*' 2>&1 | grep -E "OK \]|FAILED|PASSED|Failure"
fi
if has bench; then
  echo "== OverlapBench"
  VIREO_KERNEL_BENCH=1 build/tests/test_cuda_bench --gtest_filter='OverlapBench.*' 2>&1 | grep -E "\||FAIL"
fi
AB=(ENVS="VIREO_SPLIT_MIXED=1 -" OFFLINE=0 BUDGETS=2048 PROMPTS="${PROMPTS:-512}" OUT="$OUT")
if has fp8; then env "${AB[@]}" bash benchmarks/serve_8b_fp8.sh; fi
if has bf16; then env "${AB[@]}" QUANT= KV=auto bash benchmarks/serve_8b_fp8.sh; fi
