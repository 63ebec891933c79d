// Warp-specialised W8A8 GEMMs of our own for prefill-sized steps (hundreds to thousands of activation rows),
// in place of cuBLASLt's outer-vector-scaled FP8 GEMM, whose only algorithm (128 x 128 tiles,
// CublasLtFp8Probe.Search) runs ~10% under the same library's unscaled kernels at the 8B serving shapes
// (docs/cuda_kernels.md). Two schedules of the same TMA-fed wgmma mainloop:
// - cooperative (fp8_gemm_ws.cu): two consumer warpgroups share a 128 x 256 tile; the tensor cores wait
//   while both write it out;
// - ping-pong (fp8_gemm_pingpong.cu): each consumer warpgroup owns a 128 x 128 tile and the two take turns,
//   one writing its tile out while the other's mainloop runs.
//
// out[n, m] = round(xq[n, :] . w[m, :] * x_scale[n] * w_scale[m] (+ bias[m]) (+ residual[n, m])), one rounding
// as cuBLASLt's epilogue. Opt-in: VIREO_FP8_GEMM_WS=1 (cooperative), 2 (ping-pong) or 3 (ping-pong, block
// pairs sharing the weight tile); measurements in
// docs/cuda_kernels.md (sessions 54-55).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/cublaslt_gemm.h"

namespace vireo::cuda {

enum class Fp8GemmSchedule { kCublasLt, kCooperative, kPingpong, kPingpongPairs };

// Whether each kernel takes the shape: m a multiple of its tile width (256 cooperative, 128 ping-pong), k of
// 128, n >= 1 (rows past n are zero-filled), 16-byte aligned operands.
bool fp8_gemm_ws_ok(int64_t n, int64_t m, int64_t k);
bool fp8_gemm_pingpong_ok(int64_t n, int64_t m, int64_t k);
// Which GEMM run_linear_fp8 uses for n rows: the opted-in kernel (VIREO_FP8_GEMM_WS) when it takes the shape
// and n >= VIREO_FP8_GEMM_WS_MIN_ROWS (default 512), else cuBLASLt.
Fp8GemmSchedule fp8_gemm_schedule(int64_t n, int64_t m, int64_t k);
// a: as CublasLtGemm::run_fp8 takes it (acc unused).
void launch_fp8_gemm_ws(const CublasLtGemm::Fp8Args& a, cudaStream_t stream);
// cluster 2: pairs of blocks share each weight tile through TMA multicast.
void launch_fp8_gemm_pingpong(const CublasLtGemm::Fp8Args& a, cudaStream_t stream, int cluster = 1);
// How many clusters of two blocks of the block-pair kernel fit on the device at once (its grid's size).
int fp8_gemm_pair_clusters();

}  // namespace vireo::cuda
