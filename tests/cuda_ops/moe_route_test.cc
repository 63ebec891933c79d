// DeepSeek routing on CUDA (moe.cu's route kernels in kSigmoid mode: fp32 logits, score-correction
// bias, group limit, scaled fp32 weights; and kSoftmaxFp32, DeepSeek-V2's gate, with ERNIE 4.5 MoE's bias) and mla_pack, vs the CPU backend. Through the whole moe op on
// both expert paths (T <= 64 takes the small-T route kernels, larger T the large-T kernel). Tokens whose
// expert set could flip on summation order (group or k-th choice margins under 1e-4) are left out and
// counted. SmallAndLargeTPathsAgreeBitwise: the two route paths' ids and weights, bit for bit, in all
// three scoring modes, with and without GPT-OSS's router_b.
#include <cstring>
#include <numeric>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/moe.h"
#include "cuda_test_util.h"

namespace vireo::testing {
namespace {

using cuda::MoePath;

struct RouteCase {
  int T, hidden, inter, E, k, G, topk_group;
  bool renorm;
  float scale;
  bool softmax = false;  // kSoftmaxFp32 (DeepSeek-V2) instead of kSigmoid
  bool softmax_bias = false;  // kSoftmaxFp32 choosing on probs + score_bias (ERNIE 4.5 MoE)
};

class MoeRouteTest : public CudaOpsTest {
 protected:
  void SetUp() override {
    CudaOpsTest::SetUp();
    saved_path_ = cuda::moe_path();
  }
  void TearDown() override {
    cuda::set_moe_path(saved_path_);
    CudaOpsTest::TearDown();
  }
  // False where the routing is within 1e-4 of a tie (the group cut or the k-th pick): absolute for
  // sigmoid scores (O(1)), relative for softmax probabilities (~1 / E; group scores are sums of
  // probabilities, so they are compared in probability space, not as logits).
  bool clear(const RouteCase& c, const std::vector<float>& x, const std::vector<float>& router,
             const std::vector<float>& bias, int t) {
    std::vector<double> ch(c.E);
    for (int e = 0; e < c.E; ++e) {
      double s = 0;
      for (int h = 0; h < c.hidden; ++h) s += double(x[size_t(t) * c.hidden + h]) * router[size_t(e) * c.hidden + h];
      ch[e] = c.softmax ? s : 1 / (1 + std::exp(-s)) + bias[e];
    }
    if (c.softmax) {
      const double mx = *std::max_element(ch.begin(), ch.end());
      double z = 0;
      for (double& v : ch) z += v = std::exp(v - mx);
      for (double& v : ch) v /= z;
      if (c.softmax_bias)
        for (int e = 0; e < c.E; ++e) ch[e] += bias[e];
    }
    auto near = [&](double a, double b) { return a - b < 1e-4 * (c.softmax ? std::fabs(a) : 1.0); };
    const int per = c.E / c.G;
    std::vector<double> gs(c.G);
    for (int g = 0; g < c.G; ++g) {
      std::vector<double> v(ch.begin() + g * per, ch.begin() + (g + 1) * per);
      std::sort(v.begin(), v.end(), std::greater<double>());
      gs[g] = v[0] + v[1];
    }
    std::vector<int> gi(c.G);
    std::iota(gi.begin(), gi.end(), 0);
    std::sort(gi.begin(), gi.end(), [&](int a, int b) { return gs[a] > gs[b]; });
    if (c.topk_group < c.G && near(gs[gi[c.topk_group - 1]], gs[gi[c.topk_group]])) return false;
    std::vector<double> kept;
    for (int j = 0; j < c.topk_group; ++j)
      for (int e = gi[j] * per; e < (gi[j] + 1) * per; ++e) kept.push_back(ch[e]);
    std::sort(kept.begin(), kept.end(), std::greater<double>());
    return int(kept.size()) == c.k || !near(kept[c.k - 1], kept[c.k]);
  }
  MoePath saved_path_ = MoePath::kAuto;
};

TEST_F(MoeRouteTest, SigmoidGroupedMatchesCpu) {
  const RouteCase cases[] = {{1, 64, 32, 8, 2, 2, 1, true, 2.5f},   {5, 128, 48, 64, 6, 8, 3, true, 2.5f},
                             {40, 64, 40, 256, 8, 8, 4, true, 2.5f}, {200, 96, 32, 16, 4, 4, 2, false, 1.5f},
                             {33, 64, 24, 6, 3, 1, 1, false, 1.f},   {70, 64, 32, 64, 6, 1, 1, false, 2.f, true},
                             // small T (the small-T route kernels), kSoftmaxFp32 with groups too
                             {1, 64, 32, 64, 6, 8, 3, true, 2.5f, true}, {8, 96, 32, 32, 4, 4, 2, false, 1.f, true},
                             {8, 72, 24, 256, 8, 8, 4, true, 2.5f},     {64, 64, 24, 64, 6, 8, 3, true, 2.5f},
                             {64, 64, 24, 32, 4, 4, 2, true, 1.5f, true}, {2, 200, 24, 16, 2, 1, 1, true, 1.f, true},
                             // kSoftmaxFp32 with the choice bias (ERNIE 4.5 MoE), small and large T
                             {3, 64, 32, 8, 2, 1, 1, true, 1.f, true, true}, {90, 64, 32, 16, 4, 1, 1, true, 1.f, true, true}};
  for (DType act : {DType::kBF16, DType::kF32}) {
    use_dtype(act);
    // bf16 against the fp32 CPU op: each slot's expert output (|y| up to ~4 here) is rounded to bf16
    // (ulp 1/64 at 2..4) and the weighted sum rounds again per slot, so a small output that is the
    // difference of large terms is off by a few of those ulps (measured on the H200: 0.038 at k 4,
    // unnormalised weights scaled 1.5). A wrong expert moves an output by the size of the terms.
    const Tolerance tol = act == DType::kBF16 ? Tolerance{8e-2f, 3e-2f} : tol_for(act);
    int compared = 0, skipped = 0;
    for (const RouteCase& c : cases) {
      const float wx = 3.f / std::sqrt(float(c.hidden)), wi = 3.f / std::sqrt(float(c.inter));
      const auto x = rand_vec(size_t(c.T) * c.hidden, -1, 1, act), router = rand_vec(size_t(c.E) * c.hidden, -wx, wx, act);
      const auto gu = rand_vec(size_t(c.E) * 2 * c.inter * c.hidden, -wx, wx, act);
      const auto down = rand_vec(size_t(c.E) * c.hidden * c.inter, -wi, wi, act);
      const auto bias = rand_vec(c.E, -0.2f, 0.2f, DType::kF32);
      auto fill = [&](MoeParams p) {
        p.norm_topk_prob = c.renorm;
        p.scoring = c.softmax ? MoeScoring::kSoftmaxFp32 : MoeScoring::kSigmoid;
        p.n_group = c.G;
        p.topk_group = c.topk_group;
        p.routed_scaling_factor = c.scale;
        return p;
      };
      MoeParams cp = fill({cpu_f32(x, {c.T, c.hidden}), cpu_f32(router, {c.E, c.hidden}),
                           cpu_f32(gu, {c.E, 2 * c.inter, c.hidden}), cpu_f32(down, {c.E, c.hidden, c.inter}),
                           cpu_poisoned({c.T, c.hidden}), c.k});
      if (!c.softmax || c.softmax_bias) cp.score_bias = cpu_f32(bias, {c.E});
      cpu_->moe(cp);
      const auto want = to_host(cp.out);
      std::vector<bool> keep(c.T);
      for (int t = 0; t < c.T; ++t) {
        keep[t] = clear(c, x, router, bias, t);
        ++(keep[t] ? compared : skipped);
      }
      for (MoePath path : {MoePath::kPerSlot, MoePath::kGrouped}) {
        if (act == DType::kF32 && path == MoePath::kGrouped) continue;
        SCOPED_TRACE(std::string(dtype_name(act)) + " T " + std::to_string(c.T) + " E " + std::to_string(c.E) +
                     (path == MoePath::kGrouped ? " grouped" : " per-slot"));
        cuda::set_moe_path(path);
        MoeParams gp = fill({gpu_from(x, {c.T, c.hidden}, act), gpu_from(router, {c.E, c.hidden}, act),
                             gpu_from(gu, {c.E, 2 * c.inter, c.hidden}, act), gpu_from(down, {c.E, c.hidden, c.inter}, act),
                             gpu_poisoned({c.T, c.hidden}, act), c.k});
        if (!c.softmax || c.softmax_bias) gp.score_bias = gpu_from(bias, {c.E}, DType::kF32);
        gpu_->moe(gp);
        const auto got = to_host(gp.out);
        std::vector<float> g2, w2;
        for (int t = 0; t < c.T; ++t)
          if (keep[t]) {
            g2.insert(g2.end(), got.begin() + size_t(t) * c.hidden, got.begin() + size_t(t + 1) * c.hidden);
            w2.insert(w2.end(), want.begin() + size_t(t) * c.hidden, want.begin() + size_t(t + 1) * c.hidden);
          }
        expect_close(g2, w2, tol, "moe sigmoid");
      }
    }
    EXPECT_GT(compared, 5 * skipped);
  }
}

// The small-T route kernels (router logits over many blocks, then one warp per token) against the
// large-T kernel (one block reads the whole router per 8 tokens), forced with launch_moe_route: ids and
// weights bit for bit, in all three scoring modes, with and without groups / bias / renormalisation,
// ragged (non-vector) rows, rows of several register chunks, E up to 4096, and T past the small-T limit
// (the small-T kernels at any T when forced), and GPT-OSS's router_b (added to each logit before the
// kSoftmax rounding; unrounded in the fp32-logit modes). bf16 logits tie often (rounded), so the
// lowest-id rule is exercised too.
TEST_F(MoeRouteTest, SmallAndLargeTPathsAgreeBitwise) {
  struct C {
    int T, hidden, E, k, G, topk_group;
    MoeScoring scoring;
    bool renorm, bias;
    float scale;
    bool router_b = false;  // GPT-OSS's router bias [E] in the activation dtype
  };
  const C cases[] = {
      {1, 2048, 128, 8, 1, 1, MoeScoring::kSoftmax, true, false, 1.f},  // Qwen3-30B-A3B
      {8, 2048, 128, 8, 1, 1, MoeScoring::kSoftmax, true, false, 1.f},
      {64, 2048, 128, 8, 1, 1, MoeScoring::kSoftmax, true, false, 1.f},
      {3, 100, 60, 4, 1, 1, MoeScoring::kSoftmax, false, false, 1.f},   // hidden % 8 != 0: scalar dots (bf16 / f16)
      {17, 520, 128, 8, 4, 2, MoeScoring::kSoftmax, true, false, 1.f},  // groups in kSoftmax
      {5, 8, 8, 8, 1, 1, MoeScoring::kSoftmax, true, false, 1.f},       // k = E
      {1, 7168, 256, 8, 8, 4, MoeScoring::kSigmoid, true, true, 2.5f},  // DeepSeek-V3 (two register chunks)
      {9, 7168, 256, 8, 8, 4, MoeScoring::kSigmoid, true, true, 2.5f},
      {7, 264, 256, 8, 8, 4, MoeScoring::kSigmoid, false, true, 1.5f},
      {40, 96, 64, 6, 1, 1, MoeScoring::kSigmoid, true, false, 1.f},
      {1, 2048, 64, 6, 1, 1, MoeScoring::kSoftmaxFp32, false, false, 1.f},  // DeepSeek-V2-Lite
      {33, 72, 64, 6, 8, 3, MoeScoring::kSoftmaxFp32, true, false, 1.5f},
      {5, 12000, 16, 2, 1, 1, MoeScoring::kSoftmax, true, false, 1.f},  // 3 register chunks (bf16), 1-token blocks (f32)
      {2, 64, 4096, 8, 32, 2, MoeScoring::kSigmoid, true, true, 1.f},   // 1-warp select blocks; large-T: one token a block
      {100, 136, 60, 8, 1, 1, MoeScoring::kSoftmax, true, false, 1.f},  // past kMoeRouteSmallMaxTokens
      {1, 2880, 32, 4, 1, 1, MoeScoring::kSoftmax, true, false, 1.f, true},    // GPT-OSS-20B
      {40, 2880, 128, 4, 1, 1, MoeScoring::kSoftmax, true, false, 1.f, true},  // GPT-OSS-120B
      {100, 136, 60, 8, 1, 1, MoeScoring::kSoftmax, true, false, 1.f, true},   // router_b past the small-T limit
      {3, 100, 60, 4, 1, 1, MoeScoring::kSoftmax, false, false, 1.f, true},    // router_b, scalar dots
      {9, 264, 64, 6, 8, 3, MoeScoring::kSoftmaxFp32, true, false, 1.5f, true},
      {7, 264, 256, 8, 8, 4, MoeScoring::kSigmoid, false, true, 1.5f, true},
  };
  for (DType act : {DType::kBF16, DType::kF16, DType::kF32}) {
    use_dtype(act);
    cudaStream_t stream = static_cast<cuda::CudaBackend*>(gpu_.get())->stream();
    for (const C& c : cases) {
      SCOPED_TRACE(std::string(dtype_name(act)) + " T " + std::to_string(c.T) + " hidden " + std::to_string(c.hidden) +
                   " E " + std::to_string(c.E) + " k " + std::to_string(c.k) + " G " + std::to_string(c.G) +
                   " scoring " + std::to_string(int(c.scoring)) + (c.router_b ? " router_b" : ""));
      const float wx = 3.f / std::sqrt(float(c.hidden));
      const auto x = rand_vec(size_t(c.T) * c.hidden, -1, 1, act);
      const auto router = rand_vec(size_t(c.E) * c.hidden, -wx, wx, act);
      const auto bias = rand_vec(c.E, -0.2f, 0.2f, DType::kF32);
      MoeParams p;
      p.x = gpu_from(x, {c.T, c.hidden}, act);
      p.router_w = gpu_from(router, {c.E, c.hidden}, act);
      p.top_k = c.k;
      p.norm_topk_prob = c.renorm;
      p.scoring = c.scoring;
      if (c.bias) p.score_bias = gpu_from(bias, {c.E}, DType::kF32);
      if (c.router_b) p.router_b = gpu_from(rand_vec(c.E, -1, 1, act), {c.E}, act);
      p.n_group = c.G;
      p.topk_group = c.topk_group;
      p.routed_scaling_factor = c.scale;
      const int S = c.T * c.k;
      Tensor logits = gpu_own(gpu_->alloc({int64_t(c.T) * c.E}, DType::kF32));
      std::vector<std::vector<int>> ids(2, std::vector<int>(S));
      std::vector<std::vector<uint32_t>> wbits(2, std::vector<uint32_t>(S));
      for (int path = 0; path < 2; ++path) {
        Tensor ids_d = gpu_i32(std::vector<int>(S, -7), {S});
        Tensor w_d = gpu_poisoned({S}, DType::kF32);
        cuda::launch_moe_route(p, p.x.data, c.T, ids_d.ptr<int>(), w_d.ptr<float>(), logits.ptr<float>(),
                               path == 0 ? cuda::MoeRoutePath::kSmallT : cuda::MoeRoutePath::kLargeT, stream);
        gpu_->copy_to_host(ids_d, ids[path].data());
        gpu_->copy_to_host(w_d, wbits[path].data());
      }
      for (int t = 0; t < c.T; ++t) {
        std::vector<int> row(ids[0].begin() + size_t(t) * c.k, ids[0].begin() + size_t(t + 1) * c.k);
        for (int e : row) ASSERT_TRUE(e >= 0 && e < c.E) << "token " << t << " id " << e;
        std::sort(row.begin(), row.end());
        ASSERT_TRUE(std::adjacent_find(row.begin(), row.end()) == row.end()) << "token " << t << " repeats an expert";
        for (int j = 0; j < c.k; ++j) {
          float w;
          std::memcpy(&w, &wbits[0][size_t(t) * c.k + j], 4);
          ASSERT_TRUE(std::isfinite(w)) << "token " << t << " weight " << j;
        }
      }
      EXPECT_EQ(ids[0], ids[1]) << "expert ids differ between the small-T and large-T route kernels (seed " << seed_ << ")";
      EXPECT_EQ(wbits[0], wbits[1]) << "weights differ between the route kernels (seed " << seed_ << ")";
    }
  }
}

TEST_F(MoeRouteTest, MlaPackMatchesCpuBitwise) {
  const int T = 7, H = 3, R = 8, N = 16, V = 12, D = R + N;
  for (DType act : {DType::kBF16, DType::kF32}) {
    use_dtype(act);
    const auto q = rand_vec(size_t(T) * H * D, -1, 1, act), kv = rand_vec(size_t(T) * H * (N + V), -1, 1, act);
    const auto kpe = rand_vec(size_t(T) * R, -1, 1, act);
    Tensor cout = cpu_poisoned({T, 3 * H * D});
    cpu_->mla_pack({cpu_f32(q, {T, H * D}), cpu_f32(kv, {T, H * (N + V)}), cpu_f32(kpe, {T, R}), cout, H, R, N, V});
    Tensor gout = gpu_poisoned({T, 3 * H * D}, act);
    gpu_->mla_pack({gpu_from(q, {T, H * D}, act), gpu_from(kv, {T, H * (N + V)}, act), gpu_from(kpe, {T, R}, act), gout,
                    H, R, N, V});
    EXPECT_EQ(to_host(gout), to_host(cout));
  }
}

}  // namespace
}  // namespace vireo::testing
