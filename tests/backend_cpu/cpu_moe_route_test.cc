// MoE routing of the CPU backend (cpu::moe_route, the oracle of the CUDA route kernel) vs a direct
// transcription of transformers' DeepseekV3MoE.route_tokens_to_experts (5.x): sigmoid scores, the
// score-correction bias, group scores as the sum of each group's top-2, topk_group groups kept (others
// -inf), top-k, weights = unbiased scores, renormalised (+1e-20) and scaled. Also the whole moe op in
// sigmoid mode against a formula, the validation errors, and mla_pack.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

namespace vireo {
namespace {

struct Route {
  std::vector<int> ids;
  std::vector<double> w;
};

// One token, HF's steps spelled out with sorts (stable: lower id first among equal values).
Route hf_route(const std::vector<float>& logits, const std::vector<float>& bias, int E, int G, int topk_group, int k,
               bool renorm, double scale) {
  std::vector<double> s(E), c(E);
  for (int e = 0; e < E; ++e) {
    s[e] = 1.0 / (1.0 + std::exp(-double(logits[e])));
    c[e] = s[e] + (bias.empty() ? 0.0 : bias[e]);
  }
  const int per = E / G;
  std::vector<double> gs(G);
  for (int g = 0; g < G; ++g) {
    std::vector<double> v(c.begin() + g * per, c.begin() + (g + 1) * per);
    std::sort(v.begin(), v.end(), std::greater<double>());
    gs[g] = v[0] + v[1];
  }
  std::vector<int> gi(G);
  std::iota(gi.begin(), gi.end(), 0);
  std::stable_sort(gi.begin(), gi.end(), [&](int a, int b) { return gs[a] > gs[b]; });
  std::set<int> kept(gi.begin(), gi.begin() + topk_group);
  for (int e = 0; e < E; ++e)
    if (G > 1 && !kept.count(e / per)) c[e] = -std::numeric_limits<double>::infinity();
  std::vector<int> ei(E);
  std::iota(ei.begin(), ei.end(), 0);
  std::stable_sort(ei.begin(), ei.end(), [&](int a, int b) { return c[a] > c[b]; });
  Route r;
  double sum = 0;
  for (int j = 0; j < k; ++j) sum += s[ei[j]];
  for (int j = 0; j < k; ++j) {
    r.ids.push_back(ei[j]);
    r.w.push_back((renorm ? s[ei[j]] / (sum + 1e-20) : s[ei[j]]) * scale);
  }
  return r;
}

struct RouteCase {
  int E, k, G, topk_group;
  bool renorm, bias;
  float scale;
};

TEST(MoeRoute, SigmoidGroupedMatchesTransformersFormula) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.f, 2.f), bd(0.f, 0.3f);
  const RouteCase cases[] = {{8, 2, 2, 1, true, true, 2.5f},   {8, 2, 1, 1, true, false, 1.f},
                             {16, 4, 4, 2, false, true, 1.5f}, {64, 6, 8, 3, true, true, 2.5f},
                             {256, 8, 8, 4, true, true, 2.5f}, {12, 3, 3, 3, true, true, 1.f},
                             {32, 1, 32 / 2, 1, true, true, 1.f}};
  for (const RouteCase& c : cases) {
    SCOPED_TRACE("E " + std::to_string(c.E) + " k " + std::to_string(c.k) + " groups " + std::to_string(c.G) + "/" +
                 std::to_string(c.topk_group));
    const int T = 50;
    std::vector<float> logits(size_t(T) * c.E), bias;
    for (auto& v : logits) v = nd(rng);
    if (c.bias) {
      bias.resize(c.E);
      for (auto& v : bias) v = bd(rng);
    }
    MoeParams p;
    p.top_k = c.k;
    p.norm_topk_prob = c.renorm;
    p.scoring = MoeScoring::kSigmoid;
    if (c.bias) p.score_bias = Tensor(bias.data(), DType::kF32, {c.E});
    p.n_group = c.G;
    p.topk_group = c.topk_group;
    p.routed_scaling_factor = c.scale;
    std::vector<int32_t> ids(size_t(T) * c.k);
    std::vector<float> w(size_t(T) * c.k);
    cpu::moe_route(p, logits.data(), T, c.E, ids.data(), w.data());
    for (int t = 0; t < T; ++t) {
      std::vector<float> lt(logits.begin() + size_t(t) * c.E, logits.begin() + size_t(t + 1) * c.E);
      const Route want = hf_route(lt, bias, c.E, c.G, c.topk_group, c.k, c.renorm, c.scale);
      for (int j = 0; j < c.k; ++j) {
        EXPECT_EQ(ids[size_t(t) * c.k + j], want.ids[j]) << "token " << t << " slot " << j;
        EXPECT_NEAR(w[size_t(t) * c.k + j], want.w[j], 1e-6 * (1 + std::abs(want.w[j]))) << "token " << t;
      }
      if (c.G > 1) {  // every pick inside the kept groups
        std::set<int> groups;
        for (int j = 0; j < c.k; ++j) groups.insert(ids[size_t(t) * c.k + j] / (c.E / c.G));
        EXPECT_LE(int(groups.size()), c.topk_group);
      }
    }
  }
}

// Equal scores: lower expert id first, lower group id first; the bias steers the choice but not the weight.
TEST(MoeRoute, TiesAndBias) {
  const int E = 8;
  std::vector<float> logits(E, 0.f);  // every score 0.5
  MoeParams p;
  p.top_k = 2;
  p.scoring = MoeScoring::kSigmoid;
  p.n_group = 2;
  p.topk_group = 1;
  p.routed_scaling_factor = 2.f;
  std::vector<int32_t> ids(2);
  std::vector<float> w(2);
  cpu::moe_route(p, logits.data(), 1, E, ids.data(), w.data());
  EXPECT_EQ(ids, (std::vector<int32_t>{0, 1}));
  EXPECT_FLOAT_EQ(w[0], 1.f);  // 0.5 / 1.0 * 2
  std::vector<float> bias{0, 0, 0, 0, 0, 0.25f, 0, 0.5f};
  p.score_bias = Tensor(bias.data(), DType::kF32, {E});
  cpu::moe_route(p, logits.data(), 1, E, ids.data(), w.data());
  EXPECT_EQ(ids, (std::vector<int32_t>{7, 5}));  // group 1 wins (0.75 + 1.0 vs 1.0)
  EXPECT_FLOAT_EQ(w[0], 1.f);                     // unbiased 0.5 each, renormalised, * 2
  EXPECT_FLOAT_EQ(w[1], 1.f);
}

// The softmax defaults are Qwen3-MoE's routing: unchanged by the new fields' defaults.
TEST(MoeRoute, SoftmaxDefaults) {
  std::vector<float> logits{1.f, 3.f, 2.f, 3.f};
  MoeParams p;
  p.top_k = 2;
  std::vector<int32_t> ids(2);
  std::vector<float> w(2);
  cpu::moe_route(p, logits.data(), 1, 4, ids.data(), w.data());
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 3}));
  EXPECT_FLOAT_EQ(w[0], 0.5f);
  EXPECT_FLOAT_EQ(w[1], 0.5f);
}

// DeepSeek-V2's greedy gate: softmax in fp32, top-k, weights times routed_scaling_factor (no renorm).
TEST(MoeRoute, SoftmaxFp32IsScaledNotRenormalised) {
  std::vector<float> logits{0.f, 1.f, 2.f, 1.f};
  MoeParams p;
  p.top_k = 2;
  p.norm_topk_prob = false;
  p.scoring = MoeScoring::kSoftmaxFp32;
  p.routed_scaling_factor = 3.f;
  std::vector<int32_t> ids(2);
  std::vector<float> w(2);
  cpu::moe_route(p, logits.data(), 1, 4, ids.data(), w.data());
  const double z = 1 + 2 * std::exp(1.0) + std::exp(2.0);
  EXPECT_EQ(ids, (std::vector<int32_t>{2, 1}));
  EXPECT_NEAR(w[0], 3 * std::exp(2.0) / z, 1e-6);
  EXPECT_NEAR(w[1], 3 * std::exp(1.0) / z, 1e-6);
}

TEST(MoeRoute, RejectsBadGroups) {
  std::vector<float> logits(12, 0.f);
  std::vector<int32_t> ids(4);
  std::vector<float> w(4);
  auto run = [&](int E, int k, int G, int tg) {
    MoeParams p;
    p.top_k = k;
    p.scoring = MoeScoring::kSigmoid;
    p.n_group = G;
    p.topk_group = tg;
    cpu::moe_route(p, logits.data(), 1, E, ids.data(), w.data());
  };
  EXPECT_THROW(run(12, 2, 5, 1), Error);  // 5 does not divide 12
  EXPECT_THROW(run(12, 4, 4, 1), Error);  // one group of 3 cannot hold top-4
  EXPECT_THROW(run(12, 2, 4, 5), Error);  // topk_group > n_group
  EXPECT_THROW(run(12, 1, 12, 1), Error); // groups of one expert have no top-2
  EXPECT_NO_THROW(run(12, 4, 4, 2));
}

// The whole op in sigmoid mode: out = sum of fp32 weight * expert MLP.
TEST(MoeRoute, SigmoidMoeOpMatchesFormula) {
  const int T = 9, H = 16, I = 8, E = 8, k = 2;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  auto rv = [&](size_t n, float a) {
    std::vector<float> v(n);
    for (auto& x : v) x = a * u(rng);
    return v;
  };
  auto x = rv(size_t(T) * H, 1.f), router = rv(size_t(E) * H, 0.5f), gu = rv(size_t(E) * 2 * I * H, 0.3f),
       down = rv(size_t(E) * H * I, 0.3f), bias = rv(E, 0.2f);
  std::vector<float> out(size_t(T) * H, std::nanf(""));
  MoeParams p{Tensor(x.data(), DType::kF32, {T, H}), Tensor(router.data(), DType::kF32, {E, H}),
              Tensor(gu.data(), DType::kF32, {E, 2 * I, H}), Tensor(down.data(), DType::kF32, {E, H, I}),
              Tensor(out.data(), DType::kF32, {T, H}), k, true};
  p.scoring = MoeScoring::kSigmoid;
  p.score_bias = Tensor(bias.data(), DType::kF32, {E});
  p.n_group = 2;
  p.topk_group = 1;
  p.routed_scaling_factor = 2.5f;
  auto be = create_backend("cpu");
  be->moe(p);
  for (int t = 0; t < T; ++t) {
    std::vector<float> lt(E);
    for (int e = 0; e < E; ++e) {
      double s = 0;
      for (int h = 0; h < H; ++h) s += double(x[t * H + h]) * router[e * H + h];
      lt[e] = float(s);
    }
    const Route r = hf_route(lt, bias, E, 2, 1, k, true, 2.5);
    for (int h = 0; h < H; ++h) {
      double want = 0;
      for (int j = 0; j < k; ++j) {
        const int e = r.ids[j];
        double y = 0;
        for (int i = 0; i < I; ++i) {
          double g = 0, up = 0;
          for (int c = 0; c < H; ++c) {
            g += double(x[t * H + c]) * gu[(size_t(e) * 2 * I + i) * H + c];
            up += double(x[t * H + c]) * gu[(size_t(e) * 2 * I + I + i) * H + c];
          }
          y += g / (1 + std::exp(-g)) * up * down[(size_t(e) * H + h) * I + i];
        }
        want += r.w[j] * y;
      }
      EXPECT_NEAR(out[t * H + h], want, 1e-5) << "token " << t << " column " << h;
    }
  }
}

TEST(MlaPack, PacksHeadsBroadcastsRopeKeyAndPadsValues) {
  const int T = 3, H = 2, R = 4, N = 6, V = 5, D = R + N;
  std::vector<float> q(T * H * D), kv(T * H * (N + V)), kpe(T * R), qkv(T * 3 * H * D, std::nanf(""));
  std::iota(q.begin(), q.end(), 1000.f);
  std::iota(kv.begin(), kv.end(), 2000.f);
  std::iota(kpe.begin(), kpe.end(), 3000.f);
  MlaPackParams p{Tensor(q.data(), DType::kF32, {T, H * D}), Tensor(kv.data(), DType::kF32, {T, H * (N + V)}),
                  Tensor(kpe.data(), DType::kF32, {T, R}), Tensor(qkv.data(), DType::kF32, {T, 3 * H * D}), H, R, N, V};
  auto be = create_backend("cpu");
  be->mla_pack(p);
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h)
      for (int d = 0; d < D; ++d) {
        const float* row = &qkv[size_t(t) * 3 * H * D];
        EXPECT_EQ(row[h * D + d], q[(t * H + h) * D + d]);
        const float* src = &kv[size_t(t * H + h) * (N + V)];
        EXPECT_EQ(row[(H + h) * D + d], d < R ? kpe[t * R + d] : src[d - R]) << t << " " << h << " " << d;
        EXPECT_EQ(row[(2 * H + h) * D + d], d < V ? src[N + d] : 0.f) << t << " " << h << " " << d;
      }
  p.v_dim = D + 1;
  EXPECT_THROW(be->mla_pack(p), Error);
}

}  // namespace
}  // namespace vireo
