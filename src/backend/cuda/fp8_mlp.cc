// run_mlp_fp8 (fp8_linear.h): the gated MLP with FP8 weights on the W8A8 GEMMs, where gate_up's GEMM runs
// without scales. cuBLASLt's FP8 GEMM with per-token x per-row scales (outer vectors) runs ~13% slower than
// the same GEMM without them (docs/cuda_kernels.md, "FP8 linears"), and gate_up is half of a dense layer's
// FLOPs. Its output is read by one kernel only, the down projection's quantization, which applies the
// scales (and the bias) on the way, then SiLU-and-mul, then quantizes per token:
//   xq, xs = quantize(rms_norm(h) * norm_w)               one kernel (quantize_rows, kNorm)
//   y      = xq @ gate_up_w^T, unscaled, bf16             cuBLASLt, E4M3 -> bf16, FAST_ACCUM
//   aq, as = quantize(silu(y_g * xs * ws_g) * y_u * ...)  one kernel (quantize_rows, kSiluMulScaled)
//   h     += (aq as) @ (down_w ws_d)^T                    cuBLASLt, outer-vector scales, residual epilogue
// y holds the sums before scaling: |codes| <= 448, so up to 448^2 K, far inside bf16's range, not f16's.
// Each of y's values is rounded to bf16 twice (unscaled here, scaled in the quantization) where the
// scaled GEMM rounds once: a second rounding of at most 2^-9 relative, within bf16's tolerance.
#include <string>

#include "backend/cuda/cuda_common.h"
#include "backend/cuda/fp8_linear.h"

namespace vireo::cuda {
namespace {

size_t round_up(size_t b) { return (b + 255) / 256 * 256; }

bool fp8_weight(const Tensor& w) { return w.dtype == DType::kF8E4M3 && w.ndim() == 2 && w.row_scale != nullptr; }

}  // namespace

bool mlp_fp8_unscaled_ok(CublasLtGemm& gemm, const MlpParams& p) {
  if (p.residual.ndim() != 2 || p.residual.dtype != DType::kBF16 || p.act_fn != Activation::kSilu) return false;
  if (!fp8_weight(p.gate_up_w) || !fp8_weight(p.down_w) || p.norm_w.dtype != p.residual.dtype) return false;
  const int64_t n = p.residual.dim(0), h = p.residual.dim(1), i2 = p.gate_up_w.dim(0);
  if (n <= kFp8GemvMaxRows || i2 % 32 != 0 || h % 16 != 0) return false;  // decode rows: the GEMV forms
  if (p.gate_up_w.dim(1) != h || p.down_w.dim(0) != h || p.down_w.dim(1) != i2 / 2) return false;
  if (!p.gate_up_b.empty() && p.gate_up_b.dtype != p.residual.dtype) return false;
  return gemm.fp8_unscaled_ok(n, i2, h, DType::kBF16);
}

void run_mlp_fp8(CublasLtGemm& gemm, const MlpParams& p, const WorkspaceFn& scratch, cudaStream_t stream,
                 OpGpuTimer* timer) {
  auto mark = [&](const char* label) {
    if (timer) timer->mark(label, stream);
  };
  if (!mlp_fp8_unscaled_ok(gemm, p)) throw Error("mlp (fp8): these params take the two linears (mlp_fp8_unscaled_ok)");
  const DType t = p.residual.dtype;
  const int64_t n = p.residual.dim(0), h = p.residual.dim(1), i2 = p.gate_up_w.dim(0), inter = i2 / 2;
  if (p.gate_up.numel() < n * i2 || p.gate_up.dtype != t) throw Error("mlp (fp8): gate_up scratch must be [N, 2I]");
  if (!p.down_b.empty() && (p.down_b.numel() != h || p.down_b.dtype != t)) throw Error("mlp (fp8): down bias must be [H]");
  if (!p.gate_up_b.empty() && p.gate_up_b.numel() != i2) throw Error("mlp (fp8): gate_up bias must be [2I]");
  // One scratch request: [xq][xs][aq][as][F32 sums, where down's GEMM has no outer-vector algorithm].
  const size_t xq_b = round_up(n * h), xs_b = round_up(n * 4), aq_b = round_up(n * inter);
  const size_t acc_b = gemm.fp8_outer_vec(n, h, inter, t) ? 0 : round_up(n * h * 4);
  char* s = static_cast<char*>(scratch(xq_b + 2 * xs_b + aq_b + acc_b));
  auto* xq = reinterpret_cast<uint8_t*>(s);
  auto* xs = reinterpret_cast<float*>(s + xq_b);
  auto* aq = reinterpret_cast<uint8_t*>(s + xq_b + xs_b);
  auto* as = reinterpret_cast<float*>(s + xq_b + xs_b + aq_b);
  auto* acc = acc_b ? reinterpret_cast<float*>(s + xq_b + 2 * xs_b + aq_b) : nullptr;

  launch_fp8_quantize_rows(p.residual.data, t, n, h, xq, xs, stream, p.norm_w.data, p.norm_eps);
  mark("mlp fp8: rms_norm + quantize");
  gemm.run_fp8_unscaled(static_cast<const uint8_t*>(p.gate_up_w.data), xq, p.gate_up.data, n, i2, h, t, stream);
  mark("mlp fp8: gate_up GEMM, unscaled");
  Fp8SiluScaledArgs q;
  q.y = p.gate_up.data;
  q.dtype = t;
  q.n = n;
  q.k = inter;
  q.row_scale = xs;
  q.col_scale = p.gate_up_w.row_scale;
  q.bias = p.gate_up_b.empty() ? nullptr : p.gate_up_b.data;
  q.q = aq;
  q.scale = as;
  launch_fp8_quantize_silu_scaled(q, stream);
  mark("mlp fp8: scales + silu_and_mul + quantize");
  CublasLtGemm::Fp8Args g{static_cast<const uint8_t*>(p.down_w.data), p.down_w.row_scale, aq, as,
                          p.down_b.empty() ? nullptr : p.down_b.data, p.residual.data, n, h, inter, t, acc};
  g.residual = p.residual.data;
  gemm.run_fp8(g, stream);
  mark("mlp fp8: down GEMM");
}

}  // namespace vireo::cuda
