// A warp-specialised W8A8 GEMM for prefill-sized steps (hundreds to thousands of activation rows), in place
// of cuBLASLt's outer-vector-scaled FP8 GEMM, whose only algorithm (128 x 128 tiles, CublasLtFp8Probe.Search)
// runs ~10% under the same library's unscaled kernels at the 8B serving shapes (docs/cuda_kernels.md).
//
// out[n, m] = round(xq[n, :] . w[m, :] * x_scale[n] * w_scale[m] (+ bias[m]) (+ residual[n, m])), one rounding
// as cuBLASLt's epilogue. Opt-in (VIREO_FP8_GEMM_WS=1): its first version ran 30-50% slower than cuBLASLt on an
// H100, its epilogue waiting on global loads of the column scales (session 54); the version here stages them
// in shared memory and has not been measured yet (benchmarks/fp8_gemm_ws.sh).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/cublaslt_gemm.h"

namespace vireo::cuda {

// Whether the kernel takes the shape: m a multiple of 256, k of 128, n >= 1 (rows past n are zero-filled),
// 16-byte aligned operands.
bool fp8_gemm_ws_ok(int64_t n, int64_t m, int64_t k);
// Whether run_linear_fp8 uses it: taken, opted in (VIREO_FP8_GEMM_WS=1) and n >= VIREO_FP8_GEMM_WS_MIN_ROWS
// (default 512).
bool fp8_gemm_ws_preferred(int64_t n, int64_t m, int64_t k);
// a: as CublasLtGemm::run_fp8 takes it (acc unused).
void launch_fp8_gemm_ws(const CublasLtGemm::Fp8Args& a, cudaStream_t stream);

}  // namespace vireo::cuda
