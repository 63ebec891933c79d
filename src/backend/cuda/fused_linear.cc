// linear with the decode fusions of LinearParams on the CUDA backend (silu_mul_output: see
// run_linear_silu_output). Batch-invariant mode: always the
// unfused sequence below with the fixed-order GEMM. Otherwise N <= 4 (bf16/f16): one fused
// GEMV kernel (gemv.cu). Otherwise the unfused sequence through scratch: rms_norm / silu_and_mul
// into x' [N, K], the GEMM (cuBLASLt) into y [N, M], then add(residual, y) -> out: the same kernels,
// hence the same roundings, as the ops a model would call one by one.
#include "backend/cuda/fused_linear.h"

#include <string>

#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/fp8_linear.h"

namespace vireo::cuda {
namespace {

size_t round_up(size_t b) { return (b + 255) / 256 * 256; }

void product(CublasLtGemm& gemm, const LinearParams& q, cudaStream_t stream, bool batch_invariant) {
  if (batch_invariant) launch_gemm_invariant(q, stream);
  else gemm.run(q, stream);
}

// silu_mul_output: the fused GEMV (gate and up rows of one index in one warp) where it applies, else
// rms_norm into x' (with input_norm), the product into y [N, 2I], silu_and_mul(y) -> out, all through
// one scratch buffer.
void run_linear_silu_output(CublasLtGemm& gemm, const LinearParams& p, const WorkspaceFn& scratch,
                            cudaStream_t stream, bool batch_invariant) {
  if (p.silu_mul_input || !p.residual.empty())
    throw Error("linear: silu_mul_output cannot be combined with silu_mul_input or residual");
  if (p.w.ndim() != 2 || p.w.dim(0) % 2 != 0) throw Error("linear: silu_mul_output needs w [2I, K]");
  const int64_t m = p.w.dim(0), k = p.w.dim(1);
  if (k == 0 || p.x.dim(-1) != k || p.x.numel() % k != 0) throw Error("linear: x must be [N, K]");
  const int64_t n = p.x.numel() / k;
  const DType t = p.x.dtype;
  if (p.out.numel() != n * (m / 2) || p.out.dtype != t)
    throw Error("linear: out must be [N, M / 2] in the activation dtype (silu_mul_output)");
  if (p.w.dtype != t) throw Error("linear: x, w and out must share one dtype (upload weights in the activation dtype)");
  const bool norm = !p.input_norm.empty();
  if (norm && p.input_norm.numel() != k) throw Error("linear: input_norm must be [K]");
  if (!p.bias.empty() && p.bias.numel() != m) throw Error("linear: bias must be [M]");
  if (n == 0 || m == 0) return;
  if (!batch_invariant && launch_gemv_small_n(p, stream)) return;
  const size_t es = dtype_size(t);
  const size_t y_bytes = round_up(static_cast<size_t>(n * m) * es);
  const size_t x_bytes = norm ? round_up(static_cast<size_t>(n * k) * es) : 0;
  char* s = static_cast<char*>(scratch(y_bytes + x_bytes));
  LinearParams q = p;
  q.silu_mul_output = false;
  q.input_norm = Tensor();
  q.out = Tensor(s, t, {n, m}, DeviceKind::kCUDA);
  if (norm) {
    q.x = Tensor(s + y_bytes, t, {n, k}, DeviceKind::kCUDA);
    launch_rms_norm({p.x, p.input_norm, q.x, Tensor(), p.norm_eps}, stream);
  }
  product(gemm, q, stream, batch_invariant);
  launch_silu_and_mul({q.out, p.out, p.act}, stream);
}

}  // namespace

void run_linear(CublasLtGemm& gemm, const LinearParams& p, const WorkspaceFn& scratch, cudaStream_t stream,
                bool batch_invariant, OpGpuTimer* timer) {
  if (p.w.dtype == DType::kF8E4M3) {
    if (batch_invariant) throw Error("linear: FP8 weights have no batch-invariant form");
    run_linear_fp8(gemm, p, scratch, stream, timer);
    return;
  }
  const bool norm = !p.input_norm.empty(), silu = p.silu_mul_input, res = !p.residual.empty();
  if (p.silu_mul_output) {
    run_linear_silu_output(gemm, p, scratch, stream, batch_invariant);
    return;
  }
  if (!norm && !silu && !res) {
    product(gemm, p, stream, batch_invariant);
    return;
  }
  if (norm && silu) throw Error("linear: input_norm and silu_mul_input cannot be combined");
  if (p.w.ndim() != 2) throw Error("linear: w must be [M, K]");
  const int64_t m = p.w.dim(0), k = p.w.dim(1), in_k = silu ? 2 * k : k;
  if (k == 0 || p.x.dim(-1) != in_k || p.x.numel() % in_k != 0)
    throw Error("linear: x " + p.x.shape_str() + " must be [N, " + std::to_string(in_k) + "]" +
                (silu ? " (silu_mul_input: [N, 2K])" : ""));
  const int64_t n = p.x.numel() / in_k;
  const DType t = p.x.dtype;
  if (p.out.numel() != n * m) throw Error("linear: out must be [N, M]");
  if (p.w.dtype != t || p.out.dtype != t)
    throw Error("linear: x, w and out must share one dtype (upload weights in the activation dtype)");
  if (norm && p.input_norm.numel() != k) throw Error("linear: input_norm must be [K]");
  if (res && (p.residual.numel() != n * m || p.residual.dtype != t))
    throw Error("linear: residual must be [N, M] in the activation dtype");
  if (!p.bias.empty() && p.bias.numel() != m) throw Error("linear: bias must be [M]");
  if (n == 0 || m == 0) return;
  if (!batch_invariant && launch_gemv_small_n(p, stream)) return;

  const size_t es = dtype_size(t);
  const size_t x_bytes = (norm || silu) ? round_up(static_cast<size_t>(n * k) * es) : 0;
  const size_t y_bytes = res ? round_up(static_cast<size_t>(n * m) * es) : 0;
  char* s = static_cast<char*>(scratch(x_bytes + y_bytes));
  LinearParams q = p;
  q.input_norm = Tensor();
  q.silu_mul_input = false;
  q.residual = Tensor();
  if (norm || silu) {
    Tensor xs(s, t, {n, k}, DeviceKind::kCUDA);
    if (norm) launch_rms_norm({p.x, p.input_norm, xs, Tensor(), p.norm_eps}, stream);
    else launch_silu_and_mul({p.x, xs}, stream);
    q.x = xs;
  }
  if (!res) {
    product(gemm, q, stream, batch_invariant);
    return;
  }
  q.out = Tensor(s + x_bytes, t, {n, m}, DeviceKind::kCUDA);
  product(gemm, q, stream, batch_invariant);
  launch_add({p.residual, q.out, p.out}, stream);  // elementwise: out may alias residual
}

}  // namespace vireo::cuda
