// The W8A8 GEMM for decode batches (up to 128 rows) on wgmma, in place of cuBLASLt's outer-vector-scaled FP8
// GEMM there: at 256 rows cuBLASLt takes 15 us for Qwen3-8B's o_proj (4096 x 4096: 1.1 TB/s of weights on
// an H100) and 34 us for down (12288 -> 4096), where reading the weights takes 5.6 and 17 us; its only
// algorithm with per-row scales has too few output tiles for 132 SMs (CublasLtFp8Probe.DecodeShapes).
// This kernel splits K over blocks until the SMs are full and reduces the splits in a second pass. It is
// faster there only with few activation rows (fp8_small_gemm_preferred); from ~128 rows cuBLASLt wins.
//
// out[n, m] = round(xq[n, :] . w[m, :] * x_scale[n] * w_scale[m] (+ bias[m])), then, with residual,
// round(residual + that): launch_fp8_rescale's roundings. VIREO_FP8_SMALL_GEMM=0: cuBLASLt for every size.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/cublaslt_gemm.h"

namespace vireo::cuda {

// Whether the kernel takes the shape: 1 <= n <= 128, m and k multiples of 128.
bool fp8_small_gemm_ok(int64_t n, int64_t m, int64_t k);
// Whether run_linear_fp8 uses it: taken, and where it measured faster than cuBLASLt (few weight rows for the
// SMs, few activation rows: Qwen3-8B's o_proj and down up to 128 rows, qkv up to 16; see the .cu).
bool fp8_small_gemm_preferred(int64_t n, int64_t m, int64_t k);
// Bytes of F32 scratch the launch needs (the splits' partial sums), 0 when K is not split.
size_t fp8_small_gemm_scratch(int64_t n, int64_t m, int64_t k);
// a: as CublasLtGemm::run_fp8 takes it (acc unused); partials: fp8_small_gemm_scratch bytes.
void launch_fp8_small_gemm(const CublasLtGemm::Fp8Args& a, float* partials, cudaStream_t stream);

}  // namespace vireo::cuda
