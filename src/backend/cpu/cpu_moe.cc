// Sparse MoE MLP on the CPU (semantics in op_params.h MoeParams): the router as one GEMM over all
// tokens, routing per token, then expert by expert over the tokens that chose it (gather, gate_up
// GEMM, SiLU-mul, down GEMM, weighted scatter-add), so each expert's weights are read once a step.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

namespace vireo::cpu {
namespace {

// Expert e of a stacked [E, rows, cols] weight as an [rows, cols] view.
Tensor expert_view(const Tensor& w, int64_t e) {
  const int64_t rows = w.dim(1), cols = w.dim(2);
  const size_t bytes = static_cast<size_t>(rows * cols) * dtype_size(w.dtype);
  return Tensor(static_cast<char*>(w.data) + e * bytes, w.dtype, {rows, cols});
}

// out = x @ w^T (no bias, no fusions).
void matmul(ThreadPool& pool, const Tensor& x, const Tensor& w, const Tensor& out) {
  LinearParams lp;
  lp.x = x;
  lp.w = w;
  lp.out = out;
  linear(pool, lp);
}

}  // namespace

void moe(ThreadPool& pool, const MoeParams& p) {
  require_f32(p.x, "moe x");
  require_f32(p.out, "moe out");
  require_float(p.router_w, "moe router_w");
  require_float(p.gate_up_w, "moe gate_up_w");
  require_float(p.down_w, "moe down_w");
  if (p.x.ndim() != 2 || p.router_w.ndim() != 2 || p.gate_up_w.ndim() != 3 || p.down_w.ndim() != 3)
    throw Error("cpu backend: moe expects x [T, hidden], router_w [E, hidden], gate_up_w [E, 2I, hidden], down_w [E, hidden, I]");
  const int64_t T = p.x.dim(0), hidden = p.x.dim(1), E = p.router_w.dim(0), inter = p.down_w.dim(2);
  if (p.router_w.dim(1) != hidden || p.gate_up_w.dim(0) != E || p.gate_up_w.dim(1) != 2 * inter ||
      p.gate_up_w.dim(2) != hidden || p.down_w.dim(0) != E || p.down_w.dim(1) != hidden || p.out.numel() != T * hidden)
    throw Error("cpu backend: moe shapes do not agree");
  if (p.top_k < 1 || p.top_k > E) throw Error("cpu backend: moe top_k must be in [1, num_experts]");
  if (p.out.data == p.x.data) throw Error("cpu backend: moe out must not alias x");
  float* out = p.out.ptr<float>();
  std::fill(out, out + T * hidden, 0.0f);
  if (T == 0) return;

  // Router: logits [T, E], softmax, top-k per token.
  std::vector<float> logits(static_cast<size_t>(T * E));
  Tensor lt(logits.data(), DType::kF32, {T, E});
  matmul(pool, p.x, p.router_w, lt);
  const int k = p.top_k;
  std::vector<int32_t> chosen(static_cast<size_t>(T * k));
  std::vector<float> weight(static_cast<size_t>(T * k));
  std::vector<int64_t> order(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t) {
    const float* l = logits.data() + t * E;
    const float mx = *std::max_element(l, l + E);
    std::vector<float> prob(static_cast<size_t>(E));
    double sum = 0;
    for (int64_t e = 0; e < E; ++e) sum += prob[e] = std::exp(l[e] - mx);
    for (auto& v : prob) v = static_cast<float>(v / sum);
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int64_t a, int64_t b) { return prob[a] > prob[b] || (prob[a] == prob[b] && a < b); });
    float top_sum = 0;
    for (int j = 0; j < k; ++j) top_sum += prob[order[j]];
    for (int j = 0; j < k; ++j) {
      chosen[t * k + j] = static_cast<int32_t>(order[j]);
      weight[t * k + j] = p.norm_topk_prob ? prob[order[j]] / top_sum : prob[order[j]];
    }
  }

  // Experts in id order (HF's loop order), each over the tokens that chose it.
  std::vector<float> xs, gu, act, y;
  for (int64_t e = 0; e < E; ++e) {
    std::vector<int64_t> toks;
    std::vector<float> wts;
    for (int64_t i = 0; i < T * k; ++i)
      if (chosen[i] == e) {
        toks.push_back(i / k);
        wts.push_back(weight[i]);
      }
    const int64_t n = static_cast<int64_t>(toks.size());
    if (n == 0) continue;
    xs.resize(static_cast<size_t>(n * hidden));
    for (int64_t r = 0; r < n; ++r) std::copy_n(p.x.ptr<float>() + toks[r] * hidden, hidden, xs.data() + r * hidden);
    gu.resize(static_cast<size_t>(n * 2 * inter));
    act.resize(static_cast<size_t>(n * inter));
    y.resize(static_cast<size_t>(n * hidden));
    Tensor xt(xs.data(), DType::kF32, {n, hidden}), gt(gu.data(), DType::kF32, {n, 2 * inter});
    Tensor at(act.data(), DType::kF32, {n, inter}), yt(y.data(), DType::kF32, {n, hidden});
    matmul(pool, xt, expert_view(p.gate_up_w, e), gt);
    silu_and_mul(pool, SiluAndMulParams{gt, at});
    matmul(pool, at, expert_view(p.down_w, e), yt);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < hidden; ++c) out[toks[r] * hidden + c] += wts[r] * y[r * hidden + c];
  }
}

}  // namespace vireo::cpu
