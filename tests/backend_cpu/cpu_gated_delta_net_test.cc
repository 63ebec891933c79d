// The CPU gated_delta_net op (the oracle of the CUDA kernel) vs a whole-sequence reference written here
// in double from HF's Qwen3NextGatedDeltaNet (torch conv1d with L-1 zeros of left padding + silu,
// l2norm(q/k) with eps 1e-6 inside the sqrt, q * dk^-0.5, torch_recurrent_gated_delta_rule,
// Qwen3NextRMSNormGated). Sequences run through the op in steps of mixed lengths over scattered
// state slots (prefill chunks, decode rows, several sequences a step), so chunked == whole; a reused
// slot restarts at position 0; a padding row (slot -1) leaves every state alone. Also sigmoid_gate.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "core/error.h"

namespace vireo {
namespace {

struct Shape {
  int Hk = 2, Hv = 4, dk = 8, dv = 6, L = 4;
  int C() const { return 2 * Hk * dk + Hv * dv; }
  int P() const { return C() + Hv * dv + 2 * Hv; }
};

std::vector<float> randu(std::mt19937& rng, size_t n, float a, float lo = 0.0f) {
  std::uniform_real_distribution<float> d(-a, a);
  std::vector<float> v(n);
  for (auto& x : v) x = lo + d(rng);
  return v;
}

struct Weights {
  std::vector<float> conv_w, A_log, dt_bias, norm_w;
};

// HF's forward of one whole sequence: proj [n, P] -> out [n, Hv*dv].
std::vector<float> reference(const Shape& s, const Weights& w, const std::vector<float>& proj, int n) {
  const int C = s.C(), P = s.P(), r = s.Hv / s.Hk;
  std::vector<double> x(size_t(n) * C);
  for (int t = 0; t < n; ++t)
    for (int c = 0; c < C; ++c) {
      double acc = 0;
      for (int i = 0; i < s.L; ++i) {
        const int q = t - (s.L - 1) + i;
        if (q >= 0) acc += double(w.conv_w[size_t(c) * s.L + i]) * proj[size_t(q) * P + c];
      }
      x[size_t(t) * C + c] = acc / (1 + std::exp(-acc));
    }
  std::vector<float> out(size_t(n) * s.Hv * s.dv);
  for (int h = 0; h < s.Hv; ++h) {
    std::vector<double> S(size_t(s.dk) * s.dv, 0.0);
    const int kh = h / r;  // repeat_interleave of q / k heads
    for (int t = 0; t < n; ++t) {
      const double* xr = &x[size_t(t) * C];
      std::vector<double> q(xr + kh * s.dk, xr + (kh + 1) * s.dk);
      std::vector<double> k(xr + s.Hk * s.dk + kh * s.dk, xr + s.Hk * s.dk + (kh + 1) * s.dk);
      const double* v = xr + 2 * s.Hk * s.dk + h * s.dv;
      double qq = 0, kk = 0;
      for (int i = 0; i < s.dk; ++i) qq += q[i] * q[i], kk += k[i] * k[i];
      for (int i = 0; i < s.dk; ++i) q[i] /= std::sqrt(qq + 1e-6) * std::sqrt(double(s.dk)), k[i] /= std::sqrt(kk + 1e-6);
      const float* pr = &proj[size_t(t) * P];
      const double b = pr[C + s.Hv * s.dv + h], a = pr[C + s.Hv * s.dv + s.Hv + h];
      const double beta = 1 / (1 + std::exp(-b));
      const double g = -std::exp(double(w.A_log[h])) * std::log1p(std::exp(a + w.dt_bias[h]));
      std::vector<double> kv(s.dv, 0.0), o(s.dv, 0.0);
      for (auto& e : S) e *= std::exp(g);
      for (int i = 0; i < s.dk; ++i)
        for (int c = 0; c < s.dv; ++c) kv[c] += S[size_t(i) * s.dv + c] * k[i];
      for (int i = 0; i < s.dk; ++i)
        for (int c = 0; c < s.dv; ++c) S[size_t(i) * s.dv + c] += k[i] * (v[c] - kv[c]) * beta;
      for (int i = 0; i < s.dk; ++i)
        for (int c = 0; c < s.dv; ++c) o[c] += S[size_t(i) * s.dv + c] * q[i];
      double ms = 0;
      for (double e : o) ms += e * e / s.dv;
      for (int c = 0; c < s.dv; ++c) {
        const double z = pr[C + h * s.dv + c];
        out[(size_t(t) * s.Hv + h) * s.dv + c] =
            float(w.norm_w[c] * o[c] / std::sqrt(ms + 1e-6) * z / (1 + std::exp(-z)));
      }
    }
  }
  return out;
}

struct Seq {
  std::vector<float> proj, want;
  int slot = 0, done = 0;
};

class GatedDeltaNetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    be_ = create_backend("cpu");
    w_.conv_w = randu(rng_, size_t(sh_.C()) * sh_.L, 0.6f);
    w_.A_log = randu(rng_, sh_.Hv, 1.0f, -0.5f);
    w_.dt_bias = randu(rng_, sh_.Hv, 0.5f, 1.0f);
    w_.norm_w = randu(rng_, sh_.dv, 0.5f, 1.0f);
    conv_state_.assign(size_t(kSlots) * (sh_.L - 1) * sh_.C(), 7.0f);  // garbage: a restart must clear it
    ssm_state_.assign(size_t(kSlots) * sh_.Hv * sh_.dk * sh_.dv, -3.0f);
  }

  Seq make_seq(int n, int slot) {
    Seq s;
    s.proj = randu(rng_, size_t(n) * sh_.P(), 1.5f);
    s.want = reference(sh_, w_, s.proj, n);
    s.slot = slot;
    return s;
  }

  Tensor host(std::vector<float>& v, std::vector<int64_t> shape) { return Tensor(v.data(), DType::kF32, shape); }
  Tensor host(std::vector<int32_t>& v) { return Tensor(v.data(), DType::kI32, {int64_t(v.size())}); }

  // seqs[i] runs its next counts[i] tokens (slot -1 in pad: one padding row after them).
  void step(std::vector<Seq*> seqs, std::vector<int> counts, bool pad = false) {
    std::vector<float> proj;
    std::vector<int32_t> qs{0}, lens, slots;
    for (size_t i = 0; i < seqs.size(); ++i) {
      Seq& s = *seqs[i];
      proj.insert(proj.end(), s.proj.begin() + size_t(s.done) * sh_.P(), s.proj.begin() + size_t(s.done + counts[i]) * sh_.P());
      qs.push_back(qs.back() + counts[i]);
      lens.push_back(s.done + counts[i]);
      slots.push_back(s.slot);
    }
    if (pad) {
      proj.resize(proj.size() + sh_.P(), 0.5f);
      qs.push_back(qs.back() + 1), lens.push_back(1), slots.push_back(-1);
    }
    const int S = int(slots.size()), T = qs.back();
    std::vector<float> out(size_t(T) * sh_.Hv * sh_.dv, std::nanf(""));
    GatedDeltaNetParams p;
    p.proj = host(proj, {T, sh_.P()});
    p.conv_w = host(w_.conv_w, {sh_.C(), sh_.L});
    p.A_log = host(w_.A_log, {sh_.Hv});
    p.dt_bias = host(w_.dt_bias, {sh_.Hv});
    p.norm_w = host(w_.norm_w, {sh_.dv});
    p.conv_state = host(conv_state_, {kSlots, sh_.L - 1, sh_.C()});
    p.ssm_state = host(ssm_state_, {kSlots, sh_.Hv, sh_.dk, sh_.dv});
    p.out = host(out, {T, sh_.Hv * sh_.dv});
    p.query_start = host(qs);
    p.seq_lens = host(lens);
    p.state_slots = host(slots);
    p.num_seqs = S;
    p.num_k_heads = sh_.Hk, p.num_v_heads = sh_.Hv, p.head_k_dim = sh_.dk, p.head_v_dim = sh_.dv;
    p.conv_kernel = sh_.L;
    p.norm_eps = 1e-6f;
    be_->gated_delta_net(p);
    const int row_w = sh_.Hv * sh_.dv;
    for (size_t i = 0; i < seqs.size(); ++i) {
      Seq& s = *seqs[i];
      for (int j = 0; j < counts[i]; ++j)
        for (int c = 0; c < row_w; ++c)
          ASSERT_NEAR(out[size_t(qs[i] + j) * row_w + c], s.want[size_t(s.done + j) * row_w + c], 2e-4)
              << "seq " << i << " pos " << s.done + j << " channel " << c;
      s.done += counts[i];
    }
  }

  static constexpr int kSlots = 5;
  std::mt19937 rng_{1234};
  Shape sh_;
  Weights w_;
  std::vector<float> conv_state_, ssm_state_;
  std::unique_ptr<Backend> be_;
};

TEST_F(GatedDeltaNetTest, WholeSequenceMatchesReference) {
  Seq a = make_seq(11, 2);
  step({&a}, {11});
}

TEST_F(GatedDeltaNetTest, ChunksAndDecodeMatchWhole) {
  Seq a = make_seq(13, 4), b = make_seq(9, 0), c = make_seq(6, 1);
  step({&a, &b}, {5, 2});       // two prefills
  step({&b, &a, &c}, {1, 1, 3});  // chunks shorter than L-1 carry the conv state too
  step({&a, &c}, {2, 1}, true);   // with a padding row, which must not touch any slot
  step({&c, &a, &b}, {2, 5, 6});
  step({&a}, {0});
}

TEST_F(GatedDeltaNetTest, ReusedSlotRestartsAtPositionZero) {
  Seq a = make_seq(7, 3);
  step({&a}, {7});
  Seq b = make_seq(5, 3);  // the same slot, dirty from a
  step({&b}, {2});
  step({&b}, {3});
}

TEST_F(GatedDeltaNetTest, PaddingRowLeavesStatesAlone) {
  const auto conv0 = conv_state_, ssm0 = ssm_state_;
  Seq a = make_seq(3, 0);
  step({&a}, {3}, true);
  for (size_t i = (sh_.L - 1) * size_t(sh_.C()); i < conv0.size(); ++i) ASSERT_EQ(conv_state_[i], conv0[i]);
  for (size_t i = size_t(sh_.Hv) * sh_.dk * sh_.dv; i < ssm0.size(); ++i) ASSERT_EQ(ssm_state_[i], ssm0[i]);
}

TEST(SigmoidGateTest, FullAndBroadcastGate) {
  auto be = create_backend("cpu");
  std::mt19937 rng(7);
  const int N = 3, C = 5;
  auto x = randu(rng, N * C, 2.0f), g = randu(rng, N * C, 3.0f), g1 = randu(rng, N, 3.0f), res = randu(rng, N * C, 1.0f);
  std::vector<float> out(N * C);
  SigmoidGateParams p;
  p.x = Tensor(x.data(), DType::kF32, {N, C});
  p.gate = Tensor(g.data(), DType::kF32, {N, C});
  p.residual = Tensor(res.data(), DType::kF32, {N, C});
  p.out = Tensor(out.data(), DType::kF32, {N, C});
  be->sigmoid_gate(p);
  for (int i = 0; i < N * C; ++i) EXPECT_NEAR(out[i], res[i] + x[i] / (1 + std::exp(-g[i])), 1e-6);
  p.gate = Tensor(g1.data(), DType::kF32, {N, 1});
  p.residual = Tensor();
  p.out = p.x;  // in place
  const auto x0 = x;
  be->sigmoid_gate(p);
  for (int i = 0; i < N * C; ++i) EXPECT_NEAR(x[i], x0[i] / (1 + std::exp(-g1[i / C])), 1e-6);
}

}  // namespace
}  // namespace vireo
