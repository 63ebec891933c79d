// The fused decode forms of linear (LinearParams: input_norm, silu_mul_input, residual), composed of
// the unfused CPU ops through scratch: this is the oracle the CUDA kernels are checked against.
// Activations are F32 here, so "rounding to the activation dtype" between the steps is the identity.
#include <string>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

namespace vireo::cpu {

namespace {

// silu_mul_output: the product into y [N, 2I] (with the other fusions), then silu_and_mul (p.act) into out.
void linear_silu_output(ThreadPool& pool, const LinearParams& p) {
  if (p.silu_mul_input || !p.residual.empty())
    throw Error("cpu linear: silu_mul_output cannot be combined with silu_mul_input or residual");
  if (p.w.ndim() != 2 || p.w.dim(0) % 2 != 0)
    throw Error("cpu linear: silu_mul_output needs w [2I, K], got " + p.w.shape_str());
  const int64_t m = p.w.dim(0), k = p.w.dim(1);
  if (k == 0 || p.x.numel() % k != 0) throw Error("cpu linear: x " + p.x.shape_str() + " must be [N, K]");
  const int64_t n = p.x.numel() / k;
  if (p.out.numel() != n * (m / 2)) throw Error("cpu linear: out " + p.out.shape_str() + " must be [N, M / 2]");
  std::vector<float> ys(static_cast<size_t>(n * m));
  LinearParams q = p;
  q.silu_mul_output = false;
  q.out = Tensor(ys.data(), DType::kF32, {n, m});
  linear_fused(pool, q);
  silu_and_mul(pool, {q.out, p.out, p.act});
}

}  // namespace

void linear_fused(ThreadPool& pool, const LinearParams& p) {
  if (p.out_stride != 0 && (p.silu_mul_output || p.silu_mul_input || !p.residual.empty() || !p.row_stats.empty()))
    throw Error("cpu linear: out_stride is supported with the plain and input_norm forms only");
  if (p.silu_mul_output) {
    linear_silu_output(pool, p);
    return;
  }
  const bool norm = !p.input_norm.empty(), silu = p.silu_mul_input, res = !p.residual.empty();
  if (norm && silu) throw Error("cpu linear: input_norm and silu_mul_input cannot be combined");
  if (!norm && !silu && !res) {
    linear(pool, p);
    return;
  }
  if (p.w.ndim() != 2) throw Error("cpu linear: w must be [M, K], got " + p.w.shape_str());
  const int64_t m = p.w.dim(0), k = p.w.dim(1);
  const int64_t in_k = silu ? 2 * k : k;  // x: [N, 2K] with silu_mul_input
  if (in_k == 0 || p.x.numel() % in_k != 0 || p.x.dim(-1) != in_k)
    throw Error("cpu linear: x " + p.x.shape_str() + " must be [N, " + std::to_string(in_k) + "] for w " +
                p.w.shape_str() + (silu ? " (silu_mul_input)" : ""));
  const int64_t n = p.x.numel() / in_k;
  if (p.out.numel() != n * m) throw Error("cpu linear: out " + p.out.shape_str() + " must be [N, M]");
  if (norm && p.input_norm.numel() != k) throw Error("cpu linear: input_norm must be [K], got " + p.input_norm.shape_str());
  if (res && p.residual.numel() != n * m) throw Error("cpu linear: residual must be [N, M], got " + p.residual.shape_str());

  LinearParams q = p;
  q.input_norm = Tensor();
  q.silu_mul_input = false;
  q.residual = Tensor();
  std::vector<float> xs, ys;
  if (norm || silu) {
    xs.resize(static_cast<size_t>(n * k));
    Tensor xt(xs.data(), DType::kF32, {n, k});
    if (norm) rms_norm(pool, {p.x, p.input_norm, xt, Tensor(), p.norm_eps});
    else silu_and_mul(pool, {p.x, xt});
    q.x = xt;
  }
  if (!res) {
    linear(pool, q);
    return;
  }
  // out = residual + (x' @ w^T + bias): the add op, elementwise, so out may alias residual.
  ys.resize(static_cast<size_t>(n * m));
  q.out = Tensor(ys.data(), DType::kF32, {n, m});
  linear(pool, q);
  add(pool, {p.residual, q.out, p.out});
}

}  // namespace vireo::cpu
