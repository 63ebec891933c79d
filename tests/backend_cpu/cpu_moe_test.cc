// The CPU MoE op (the oracle of the CUDA one) vs per-token formulas written here from HF's
// Qwen3MoeSparseMoeBlock (and GptOssExperts, below): softmax over the router logits, top-k, optional
// renormalisation, the weighted sum of the chosen experts' SwiGLU MLPs. Fresh random inputs,
// NaN-poisoned outputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "core/error.h"

namespace vireo {
namespace {

std::vector<float> randu(std::mt19937& rng, size_t n, float a) {
  std::uniform_real_distribution<float> d(-a, a);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// out [T, H] by the formula, one token at a time.
std::vector<float> reference(const std::vector<float>& x, const std::vector<float>& router, const std::vector<float>& gu,
                             const std::vector<float>& down, int T, int H, int I, int E, int k, bool renorm) {
  std::vector<float> out(size_t(T) * H, 0.f);
  for (int t = 0; t < T; ++t) {
    const float* xt = &x[size_t(t) * H];
    std::vector<double> p(E);
    for (int e = 0; e < E; ++e) p[e] = std::inner_product(xt, xt + H, &router[size_t(e) * H], 0.0);
    const double mx = *std::max_element(p.begin(), p.end());
    double sum = 0;
    for (auto& v : p) sum += v = std::exp(v - mx);
    for (auto& v : p) v /= sum;
    std::vector<int> ids(E);
    std::iota(ids.begin(), ids.end(), 0);
    std::stable_sort(ids.begin(), ids.end(), [&](int a, int b) { return p[a] > p[b]; });
    double top = 0;
    for (int j = 0; j < k; ++j) top += p[ids[j]];
    for (int j = 0; j < k; ++j) {
      const int e = ids[j];
      const double w = renorm ? p[e] / top : p[e];
      std::vector<double> act(I);
      for (int i = 0; i < I; ++i) {
        const double g = std::inner_product(xt, xt + H, &gu[(size_t(e) * 2 * I + i) * H], 0.0);
        const double u = std::inner_product(xt, xt + H, &gu[(size_t(e) * 2 * I + I + i) * H], 0.0);
        act[i] = g / (1 + std::exp(-g)) * u;
      }
      for (int h = 0; h < H; ++h) {
        double y = 0;
        for (int i = 0; i < I; ++i) y += act[i] * down[(size_t(e) * H + h) * I + i];
        out[size_t(t) * H + h] += float(w * y);
      }
    }
  }
  return out;
}

TEST(CpuMoe, MatchesPerTokenFormula) {
  auto be = create_backend("cpu");
  std::mt19937 rng(7);
  struct Case { int T, H, I, E, k; bool renorm; };
  for (Case c : {Case{1, 16, 8, 4, 2, true}, Case{9, 32, 12, 6, 3, false}, Case{5, 24, 10, 8, 1, true}, Case{4, 16, 8, 3, 3, true}}) {
    SCOPED_TRACE("T " + std::to_string(c.T) + " E " + std::to_string(c.E) + " k " + std::to_string(c.k));
    auto x = randu(rng, size_t(c.T) * c.H, 1), router = randu(rng, size_t(c.E) * c.H, 1);
    auto gu = randu(rng, size_t(c.E) * 2 * c.I * c.H, 0.5f), down = randu(rng, size_t(c.E) * c.H * c.I, 0.5f);
    std::vector<float> out(size_t(c.T) * c.H, std::numeric_limits<float>::quiet_NaN());
    be->moe({Tensor(x.data(), DType::kF32, {c.T, c.H}), Tensor(router.data(), DType::kF32, {c.E, c.H}),
             Tensor(gu.data(), DType::kF32, {c.E, 2 * c.I, c.H}), Tensor(down.data(), DType::kF32, {c.E, c.H, c.I}),
             Tensor(out.data(), DType::kF32, {c.T, c.H}), c.k, c.renorm});
    const auto want = reference(x, router, gu, down, c.T, c.H, c.I, c.E, c.k, c.renorm);
    for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], want[i], 1e-4 + 1e-4 * std::fabs(want[i])) << i;
  }
}

TEST(CpuMoe, OneExpertIsTheDenseMlp) {
  auto be = create_backend("cpu");
  std::mt19937 rng(8);
  const int T = 3, H = 16, I = 8;
  auto x = randu(rng, T * H, 1), router = randu(rng, H, 1), gu = randu(rng, 2 * I * H, 0.5f), down = randu(rng, H * I, 0.5f);
  std::vector<float> out(T * H), gate_up(T * 2 * I), act(T * I), dense(T * H);
  be->moe({Tensor(x.data(), DType::kF32, {T, H}), Tensor(router.data(), DType::kF32, {1, H}),
           Tensor(gu.data(), DType::kF32, {1, 2 * I, H}), Tensor(down.data(), DType::kF32, {1, H, I}),
           Tensor(out.data(), DType::kF32, {T, H}), 1, false});
  LinearParams lp;
  lp.x = Tensor(x.data(), DType::kF32, {T, H});
  lp.w = Tensor(gu.data(), DType::kF32, {2 * I, H});
  lp.out = Tensor(gate_up.data(), DType::kF32, {T, 2 * I});
  be->linear(lp);
  be->silu_and_mul({Tensor(gate_up.data(), DType::kF32, {T, 2 * I}), Tensor(act.data(), DType::kF32, {T, I})});
  lp.x = Tensor(act.data(), DType::kF32, {T, I});
  lp.w = Tensor(down.data(), DType::kF32, {H, I});
  lp.out = Tensor(dense.data(), DType::kF32, {T, H});
  be->linear(lp);
  for (int i = 0; i < T * H; ++i) EXPECT_NEAR(out[i], dense[i], 1e-6f + 1e-6f * std::fabs(dense[i]));
}

TEST(CpuMoe, RejectsBadArguments) {
  auto be = create_backend("cpu");
  std::vector<float> v(4096, 0.1f), out(64);
  Tensor x(v.data(), DType::kF32, {4, 16}), router(v.data(), DType::kF32, {4, 16});
  Tensor gu(v.data(), DType::kF32, {4, 16, 16}), down(v.data(), DType::kF32, {4, 16, 8}), o(out.data(), DType::kF32, {4, 16});
  EXPECT_THROW(be->moe({x, router, gu, down, o, 5, true}), Error);  // top_k > E
  EXPECT_THROW(be->moe({x, router, gu, down, x, 2, true}), Error);  // out aliases x
  EXPECT_THROW(be->moe({x, router, down, gu, o, 2, true}), Error);  // shapes disagree
}

// GPT-OSS's form (router bias, expert biases, clamped SwiGLU) vs a per-token formula written here from
// HF's GptOssTopKRouter / GptOssExperts: top-k of the router logits, a softmax over them, and per chosen
// expert (up.clamp(-limit, limit) + 1) * glu(gate.clamp(max=limit)) through down, biases added after
// each product. Inputs large enough that the clamps bite.
struct Weights {
  int H, I, E;
  std::vector<float> router, router_b, gu, gu_b, down, down_b;  // gu: [E, 2I, H] = [gate; up] rows
};

std::vector<float> reference(const std::vector<float>& x, const Weights& w, int T, int k, float alpha, float limit) {
  const int H = w.H, I = w.I, E = w.E;
  std::vector<float> out(size_t(T) * H, 0.f);
  for (int t = 0; t < T; ++t) {
    const float* xt = &x[size_t(t) * H];
    std::vector<double> logit(E);
    for (int e = 0; e < E; ++e) logit[e] = std::inner_product(xt, xt + H, &w.router[size_t(e) * H], 0.0) + w.router_b[e];
    std::vector<int> ids(E);
    std::iota(ids.begin(), ids.end(), 0);
    std::stable_sort(ids.begin(), ids.end(), [&](int a, int b) { return logit[a] > logit[b]; });
    double z = 0;
    for (int j = 0; j < k; ++j) z += std::exp(logit[ids[j]] - logit[ids[0]]);
    for (int j = 0; j < k; ++j) {
      const int e = ids[j];
      const double weight = std::exp(logit[e] - logit[ids[0]]) / z;
      std::vector<double> act(I);
      for (int i = 0; i < I; ++i) {
        double g = std::inner_product(xt, xt + H, &w.gu[(size_t(e) * 2 * I + i) * H], 0.0) + w.gu_b[size_t(e) * 2 * I + i];
        double u = std::inner_product(xt, xt + H, &w.gu[(size_t(e) * 2 * I + I + i) * H], 0.0) +
                   w.gu_b[size_t(e) * 2 * I + I + i];
        g = std::min<double>(g, limit);
        u = std::clamp<double>(u, -limit, limit);
        act[i] = (u + 1) * g / (1 + std::exp(-alpha * g));
      }
      for (int h = 0; h < H; ++h) {
        double y = w.down_b[size_t(e) * H + h];
        for (int i = 0; i < I; ++i) y += act[i] * w.down[(size_t(e) * H + h) * I + i];
        out[size_t(t) * H + h] += float(weight * y);
      }
    }
  }
  return out;
}

TEST(CpuMoe, GptOssFormMatchesPerTokenFormula) {
  auto be = create_backend("cpu");
  std::mt19937 rng(11);
  struct Case { int T, H, I, E, k; };
  for (Case c : {Case{1, 16, 8, 4, 2}, Case{7, 32, 12, 8, 4}, Case{3, 24, 10, 6, 1}}) {
    SCOPED_TRACE("T " + std::to_string(c.T) + " E " + std::to_string(c.E) + " k " + std::to_string(c.k));
    Weights w{c.H, c.I, c.E};
    w.router = randu(rng, size_t(c.E) * c.H, 1), w.router_b = randu(rng, c.E, 1);
    // |x . row| reaches ~5 with these ranges: above limit 2 for a good share of gate and up values.
    w.gu = randu(rng, size_t(c.E) * 2 * c.I * c.H, 1.0f), w.gu_b = randu(rng, size_t(c.E) * 2 * c.I, 1);
    w.down = randu(rng, size_t(c.E) * c.H * c.I, 0.5f), w.down_b = randu(rng, size_t(c.E) * c.H, 1);
    auto x = randu(rng, size_t(c.T) * c.H, 1);
    std::vector<float> out(size_t(c.T) * c.H, std::numeric_limits<float>::quiet_NaN());
    MoeParams p;
    p.x = Tensor(x.data(), DType::kF32, {c.T, c.H});
    p.router_w = Tensor(w.router.data(), DType::kF32, {c.E, c.H});
    p.router_b = Tensor(w.router_b.data(), DType::kF32, {c.E});
    p.gate_up_w = Tensor(w.gu.data(), DType::kF32, {c.E, 2 * c.I, c.H});
    p.gate_up_b = Tensor(w.gu_b.data(), DType::kF32, {c.E, 2 * c.I});
    p.down_w = Tensor(w.down.data(), DType::kF32, {c.E, c.H, c.I});
    p.down_b = Tensor(w.down_b.data(), DType::kF32, {c.E, c.H});
    p.out = Tensor(out.data(), DType::kF32, {c.T, c.H});
    p.top_k = c.k;
    p.norm_topk_prob = true;
    p.swiglu_alpha = 1.702f;
    p.swiglu_limit = 2.0f;
    be->moe(p);
    const auto want = reference(x, w, c.T, c.k, 1.702f, 2.0f);
    for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], want[i], 1e-4 + 1e-4 * std::fabs(want[i])) << i;
    p.gate_up_b = Tensor(w.gu.data(), DType::kF32, {c.E, c.I});  // wrong width
    EXPECT_THROW(be->moe(p), Error);
  }
}

}  // namespace
}  // namespace vireo
