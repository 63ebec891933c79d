// Linears with FP8 weights (DType::kF8E4M3, one F32 scale a row in Tensor::row_scale; --quantization fp8).
// run_linear_fp8 takes every form of LinearParams but row_stats: below fp8_gemm_min_rows rows a weight-only
// GEMV (fp8 x bf16 in fp32), more rows quantize the activation per row to E4M3 and run cuBLASLt's FP8
// GEMM with outer-vector scales (per token x per weight row; where cuBLASLt has none, unscaled into F32 and
// a rescale kernel); fused prologues and epilogues run as the separate kernels, through one scratch request.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/cublaslt_gemm.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/op_gpu_timer.h"

namespace vireo::cuda {

constexpr int64_t kFp8GemvMaxRows = 8;  // what the GEMV kernel takes
// From how many rows the W8A8 GEMM runs instead of the GEMV. The GEMV's time grows with the rows (its fp8 ->
// f32 conversions and FMAs run on CUDA cores); the tensor-core GEMM's barely does, but with few output rows
// over a long K it has few tiles for 132 SMs. On an H100 (Fp8Bench.C_SmallN, session 38; GEMV vs quantize +
// GEMM): qkv 4096 -> 6144 at 2 rows 20.3 vs 17.5 us, gate_up 4096 -> 24576 at 3 rows 58.7 vs 44.8 us, but
// down 12288 -> 4096 at 4 rows 31.6 vs 41.1 us and at 8 rows 54.1 vs 38.6 us.
inline int64_t fp8_gemm_min_rows(int64_t m, int64_t k) { return m > k ? 3 : 7; }

// out = epilogue(scale[m] * sum_k fp8(w[m, k]) * prologue(x)[n, k] + bias[m]), fp32 sums, each stage's
// result rounded to the activation dtype as the separate kernels round it.
struct Fp8GemvArgs {
  const void* x = nullptr;         // [n, k] activation dtype
  const uint8_t* w = nullptr;      // [m, k] E4M3
  const float* w_scale = nullptr;  // [m]
  const void* bias = nullptr;      // [m] activation dtype, or null
  void* out = nullptr;             // [n, m] ([n, m / 2] with silu_out) activation dtype
  int64_t n = 0, m = 0, k = 0;
  DType dtype = DType::kBF16;
  const void* norm_w = nullptr;    // prologue: RMSNorm of x with this [k] weight (activation dtype), or null
  float eps = 1e-6f;
  const void* residual = nullptr;  // epilogue: out = residual + y ([n, m]; may be out itself), or null
  bool silu_out = false;           // epilogue: out[:, j] = act(y[:, j]) * y[:, j + m / 2]
  Activation act = Activation::kSilu;
};
void launch_gemv_fp8(const Fp8GemvArgs& a, cudaStream_t stream);

// q [n, k] E4M3 and scale [n] of x [n, k] (bf16/f16; fp8_quantize.cu): per row, scale = max |x| / 448 (1 if
// zero), q = satfinite_e4m3(x * (1 / scale)) as core/fp8.h's fp8_quantize_rows. With
// norm_w ([k], the activation dtype): of rms_norm(x, norm_w, eps) instead; with silu_mul (x [n, 2k]): of
// silu_and_mul(x) (silu with the approximate reciprocal, __fdividef). Those values are rounded to the
// activation dtype first, as the separate kernels round.
void launch_fp8_quantize_rows(const void* x, DType t, int64_t n, int64_t k, uint8_t* q, float* scale,
                              cudaStream_t stream, const void* norm_w = nullptr, float eps = 0.f,
                              bool silu_mul = false);

// q [n, k] E4M3 and scale [n] of silu(g) * u, where [g; u] = round(y[n, 2k] * row_scale[n] * col_scale[2k]
// (+ bias[2k])): y an unscaled FP8 GEMM's output (gate_up in run_mlp_fp8), each value rounded to the
// activation dtype as the scaled GEMM would have stored it, then silu_and_mul's rounding.
struct Fp8SiluScaledArgs {
  const void* y = nullptr;           // [n, 2k] activation dtype
  DType dtype = DType::kBF16;
  int64_t n = 0, k = 0;
  const float* row_scale = nullptr;  // [n]
  const float* col_scale = nullptr;  // [2k]
  const void* bias = nullptr;        // [2k] activation dtype, or null
  uint8_t* q = nullptr;              // [n, k]
  float* scale = nullptr;            // [n]
};
void launch_fp8_quantize_silu_scaled(const Fp8SiluScaledArgs& a, cudaStream_t stream);

// out[n, m] = acc[n, m] * x_scale[n] * w_scale[m] (+ bias[m]) in the activation dtype: the scales of an
// unscaled FP8 GEMM (CublasLtGemm::run_fp8 where cuBLASLt has no outer-vector algorithm). With residual
// ([n, m], may be out): out = round(residual + round(that)), as a separate add would give.
void launch_fp8_rescale(const float* acc, const float* x_scale, const float* w_scale, const void* bias, void* out,
                        DType t, int64_t n, int64_t m, cudaStream_t stream, const void* residual = nullptr);

// timer: marks "fp8 quantize ..." after the activation's quantization (VIREO_OP_TIMING), or null.
void run_linear_fp8(CublasLtGemm& gemm, const LinearParams& p, const WorkspaceFn& scratch, cudaStream_t stream,
                    OpGpuTimer* timer = nullptr);

// The gated MLP (MlpParams) with FP8 weights on the W8A8 GEMMs, gate_up's output left unscaled (fp8_mlp.cc).
// Whether it takes these params: bf16 activations (unscaled sums overflow f16), SiLU, both weights FP8
// with row scales, more rows than the GEMV takes, and cuBLASLt's unscaled E4M3 -> bf16 algorithm.
bool mlp_fp8_unscaled_ok(CublasLtGemm& gemm, const MlpParams& p);
// timer: marks its four parts (VIREO_OP_TIMING, eager steps), or null.
void run_mlp_fp8(CublasLtGemm& gemm, const MlpParams& p, const WorkspaceFn& scratch, cudaStream_t stream,
                 OpGpuTimer* timer = nullptr);

}  // namespace vireo::cuda
