#!/usr/bin/env bash
# How much HBM bandwidth the FP8 decode attention draws per SM, by kernel form: OverlapBench times the decode
# rows' attention (228 rows over ~1.1k FP8 keys, Qwen3-8B heads) alone on 16 / 24 / 32 / 48-SM partitions
# (green contexts) and beside a GEMM. Session 48 (H100, form 31): ~20-25 GB/s an SM on any partition, so the
# split mixed steps could not hide it (docs/cuda_kernels.md). A form that draws more per SM is what they need.
# Forms (VIREO_FP8_DECODE): 31 (default, lean: 3 stages of 16 keys), 41, 32, 42; 30 = 31 before session 49
# (attention_decode_fp8.cuh). Session 49 (H100, form 31 before the lean change): 26.6 / 27.3 / 27.4 / 25.1 GB/s an SM alone.
# Run on the device with build/tests/test_cuda_bench; env FORMS ("31 30 41 32 42").
set -uo pipefail
cd "$(dirname "$0")/.."
for f in ${FORMS:-31 30 41 32 42}; do
  echo "== VIREO_FP8_DECODE=$f"
  VIREO_FP8_DECODE=$f VIREO_KERNEL_BENCH=1 build/tests/test_cuda_bench --gtest_filter='OverlapBench.*' 2>&1 |
    grep -E "^fp8|SMs:" | head -10
done
