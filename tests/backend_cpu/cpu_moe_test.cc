// The CPU MoE op (the oracle of the CUDA one) vs a per-token formula written here from HF's
// Qwen3MoeSparseMoeBlock: softmax over the router logits, top-k, optional renormalisation, the
// weighted sum of the chosen experts' SwiGLU MLPs. Fresh random inputs, NaN-poisoned outputs.
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

}  // namespace
}  // namespace vireo
