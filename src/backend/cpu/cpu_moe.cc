// Sparse MoE MLP on the CPU (semantics in op_params.h MoeParams): the router as one GEMM over all
// tokens, routing per token, then expert by expert over the tokens that chose it (gather, gate_up
// GEMM, SiLU-mul or GPT-OSS's clamped SwiGLU, down GEMM, weighted scatter-add), so each expert's
// weights are read once a step. MXFP4 experts (MoeParams::mxfp4) go through linear_mxfp4 (cpu_mxfp4.cc).
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
  const size_t bytes = dtype_row_bytes(w.dtype, rows * cols);  // block types: whole rows of blocks
  return Tensor(static_cast<char*>(w.data) + e * bytes, w.dtype, {rows, cols});
}

// Row e of a stacked [E, n] bias as an [n] view (empty stays empty).
Tensor expert_bias(const Tensor& b, int64_t e) {
  if (b.empty()) return b;
  const int64_t n = b.dim(1);
  return Tensor(static_cast<char*>(b.data) + e * n * dtype_size(b.dtype), b.dtype, {n});
}

// out = x @ w^T + bias (bias optional; no fusions).
void matmul(ThreadPool& pool, const Tensor& x, const Tensor& w, const Tensor& out, const Tensor& bias = Tensor()) {
  LinearParams lp;
  lp.x = x;
  lp.w = w;
  lp.bias = bias;
  lp.out = out;
  linear(pool, lp);
}

// out = x @ w[e]^T + bias[e] for expert e of a stacked weight: dense [E, rows, cols] (scales empty), or
// MXFP4 U8 blocks [E, rows, cols / 2] with their U8 scales [E, rows, cols / 32].
void expert_matmul(ThreadPool& pool, const Tensor& x, const Tensor& w, const Tensor& scales, int64_t e,
                   const Tensor& out, const Tensor& bias) {
  if (scales.empty()) return matmul(pool, x, expert_view(w, e), out, expert_bias(bias, e));
  linear_mxfp4(pool, x, expert_view(w, e), expert_view(scales, e), expert_bias(bias, e), out);
}

// Throws unless the expert weights have MoeParams' shapes for E experts, hidden and I: dense gate_up_w
// [E, 2I, hidden] and down_w [E, hidden, I] in F32/F16/BF16 or a block type (Q4_0 ... Q6_K), or MXFP4 (U8 blocks and scales, hidden and
// I multiples of 32).
void validate_experts(const MoeParams& p, int64_t E, int64_t hidden, int64_t inter) {
  auto is = [](const Tensor& t, int64_t a, int64_t b, int64_t c) {
    return t.ndim() == 3 && t.dim(0) == a && t.dim(1) == b && t.dim(2) == c;
  };
  if (!p.mxfp4()) {
    // Block types (GGUF experts kept packed) go through linear_blocks like any linear.
    if (!dtype_is_blocked(p.gate_up_w.dtype)) require_float(p.gate_up_w, "moe gate_up_w");
    if (!dtype_is_blocked(p.down_w.dtype)) require_float(p.down_w, "moe down_w");
    if (!is(p.gate_up_w, E, 2 * inter, hidden) || !is(p.down_w, E, hidden, inter))
      throw Error("cpu backend: moe expects gate_up_w [E, 2I, hidden], down_w [E, hidden, I]; got " +
                  p.gate_up_w.shape_str() + ", " + p.down_w.shape_str());
    return;
  }
  for (const Tensor* t : {&p.gate_up_w, &p.down_w, &p.gate_up_scales, &p.down_scales})
    if (t->dtype != DType::kU8) throw Error("cpu backend: moe MXFP4 experts and their scales must be U8");
  if (hidden % 32 != 0 || inter % 32 != 0 || !is(p.gate_up_w, E, 2 * inter, hidden / 2) ||
      !is(p.gate_up_scales, E, 2 * inter, hidden / 32) || !is(p.down_w, E, hidden, inter / 2) ||
      !is(p.down_scales, E, hidden, inter / 32))
    throw Error("cpu backend: moe MXFP4 experts must be gate_up_w [E, 2I, hidden / 2], gate_up_scales [E, 2I, "
                "hidden / 32], down_w [E, hidden, I / 2], down_scales [E, hidden, I / 32], hidden and I multiples "
                "of 32; got " + p.gate_up_w.shape_str() + ", " + p.gate_up_scales.shape_str() + ", " +
                p.down_w.shape_str() + ", " + p.down_scales.shape_str());
}

// GPT-OSS's clamped SwiGLU (MoeParams::swiglu_limit): gu [n, 2I] = [gate | up] -> act [n, I].
void clamped_swiglu(const float* gu, int64_t n, int64_t inter, float alpha, float limit, float* act) {
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < inter; ++i) {
      const float g = std::min(gu[r * 2 * inter + i], limit);
      const float u = std::clamp(gu[r * 2 * inter + inter + i], -limit, limit);
      act[r * inter + i] = (u + 1.0f) * (g / (1.0f + std::exp(-alpha * g)));
    }
}

}  // namespace

void validate_moe_routing(const MoeParams& p, int64_t E, const char* who) {
  const std::string w = who;
  if (p.top_k < 1 || p.top_k > E) throw Error(w + ": moe top_k must be in [1, num_experts]");
  if (p.n_group < 1 || p.n_group > 32 || E % p.n_group != 0)
    throw Error(w + ": moe n_group must be in [1, 32] and divide the number of experts");
  if (p.topk_group < 1 || p.topk_group > p.n_group) throw Error(w + ": moe topk_group must be in [1, n_group]");
  if (static_cast<int64_t>(p.topk_group) * (E / p.n_group) < p.top_k)
    throw Error(w + ": moe topk_group groups hold fewer than top_k experts");
  if (p.n_group > 1 && E / p.n_group < 2) throw Error(w + ": moe groups need at least 2 experts (top-2 group score)");
  if (!p.score_bias.empty() && (p.score_bias.dtype != DType::kF32 || p.score_bias.numel() != E))
    throw Error(w + ": moe score_bias must be F32 [num_experts]");
}

void moe_route(const MoeParams& p, const float* logits, int64_t T, int64_t E, int32_t* ids, float* weights) {
  validate_moe_routing(p, E, "cpu backend");
  const int k = p.top_k;
  const bool sigmoid = p.scoring == MoeScoring::kSigmoid;
  const bool scaled = p.scoring != MoeScoring::kSoftmax;  // DeepSeek: fp32 weights, + renorm_eps, scale
  const float* bias = p.score_bias.empty() ? nullptr : p.score_bias.ptr<float>();
  const int64_t G = p.n_group, per = E / G;
  std::vector<float> prob(static_cast<size_t>(E)), choice(static_cast<size_t>(E));
  std::vector<int64_t> order(static_cast<size_t>(E));
  std::vector<float> gscore(static_cast<size_t>(G));
  std::vector<int64_t> gorder(static_cast<size_t>(G));
  for (int64_t t = 0; t < T; ++t) {
    const float* l = logits + t * E;
    if (sigmoid) {
      for (int64_t e = 0; e < E; ++e) prob[e] = 1.0f / (1.0f + std::exp(-l[e]));
    } else {
      const float mx = *std::max_element(l, l + E);
      double sum = 0;
      for (int64_t e = 0; e < E; ++e) sum += prob[e] = std::exp(l[e] - mx);
      for (auto& v : prob) v = static_cast<float>(v / sum);
    }
    for (int64_t e = 0; e < E; ++e) choice[e] = prob[e] + (bias ? bias[e] : 0.0f);
    if (G > 1) {  // keep the topk_group groups with the largest top-2 sums
      for (int64_t g = 0; g < G; ++g) {
        float a = -INFINITY, b = -INFINITY;
        for (int64_t e = g * per; e < (g + 1) * per; ++e) {
          if (choice[e] > a) {
            b = a;
            a = choice[e];
          } else if (choice[e] > b) {
            b = choice[e];
          }
        }
        gscore[g] = a + b;
      }
      std::iota(gorder.begin(), gorder.end(), 0);
      std::partial_sort(gorder.begin(), gorder.begin() + p.topk_group, gorder.end(), [&](int64_t a, int64_t b) {
        return gscore[a] > gscore[b] || (gscore[a] == gscore[b] && a < b);
      });
      std::vector<char> keep(static_cast<size_t>(G), 0);
      for (int j = 0; j < p.topk_group; ++j) keep[gorder[j]] = 1;
      for (int64_t e = 0; e < E; ++e)
        if (!keep[e / per]) choice[e] = -INFINITY;
    }
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
      return choice[a] > choice[b] || (choice[a] == choice[b] && a < b);
    });
    float top_sum = 0;
    for (int j = 0; j < k; ++j) top_sum += prob[order[j]];
    for (int j = 0; j < k; ++j) {
      ids[t * k + j] = static_cast<int32_t>(order[j]);
      float w = prob[order[j]];
      if (scaled) {
        if (p.norm_topk_prob) w /= top_sum + p.renorm_eps;
        w *= p.routed_scaling_factor;
      } else if (p.norm_topk_prob) {
        w /= top_sum;
      }
      weights[t * k + j] = w;
    }
  }
}

void moe(ThreadPool& pool, const MoeParams& p) {
  require_f32(p.x, "moe x");
  require_f32(p.out, "moe out");
  require_float(p.router_w, "moe router_w");
  if (p.x.ndim() != 2 || p.router_w.ndim() != 2 || p.down_w.ndim() != 3)
    throw Error("cpu backend: moe expects x [T, hidden], router_w [E, hidden], gate_up_w [E, 2I, hidden], down_w [E, hidden, I]");
  const int64_t T = p.x.dim(0), hidden = p.x.dim(1), E = p.router_w.dim(0), inter = p.inter();
  if (p.router_w.dim(1) != hidden || p.out.numel() != T * hidden) throw Error("cpu backend: moe shapes do not agree");
  validate_experts(p, E, hidden, inter);
  validate_moe_routing(p, E, "cpu backend");
  if ((!p.router_b.empty() && p.router_b.numel() != E) ||
      (!p.gate_up_b.empty() && (p.gate_up_b.ndim() != 2 || p.gate_up_b.dim(0) != E || p.gate_up_b.dim(1) != 2 * inter)) ||
      (!p.down_b.empty() && (p.down_b.ndim() != 2 || p.down_b.dim(0) != E || p.down_b.dim(1) != hidden)))
    throw Error("cpu backend: moe biases must be router_b [E], gate_up_b [E, 2I], down_b [E, hidden]");
  if (p.out.data == p.x.data) throw Error("cpu backend: moe out must not alias x");
  float* out = p.out.ptr<float>();
  std::fill(out, out + T * hidden, 0.0f);
  if (T == 0) return;

  // Router: logits [T, E], then scores and the top-k per token.
  std::vector<float> logits(static_cast<size_t>(T * E));
  Tensor lt(logits.data(), DType::kF32, {T, E});
  matmul(pool, p.x, p.router_w, lt, p.router_b);
  const int k = p.top_k;
  std::vector<int32_t> chosen(static_cast<size_t>(T * k));
  std::vector<float> weight(static_cast<size_t>(T * k));
  moe_route(p, logits.data(), T, E, chosen.data(), weight.data());

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
    expert_matmul(pool, xt, p.gate_up_w, p.gate_up_scales, e, gt, p.gate_up_b);
    if (p.swiglu_limit > 0.0f) {
      clamped_swiglu(gu.data(), n, inter, p.swiglu_alpha, p.swiglu_limit, act.data());
    } else {
      silu_and_mul(pool, SiluAndMulParams{gt, at});
    }
    expert_matmul(pool, at, p.down_w, p.down_scales, e, yt, p.down_b);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < hidden; ++c) out[toks[r] * hidden + c] += wts[r] * y[r * hidden + c];
  }
}

}  // namespace vireo::cpu
