// Sparse MoE MLP (moe.cu) vs the CPU backend: fresh random inputs, poisoned outputs, every element.
// The GPU rounds router logits to the activation dtype (as HF's bf16 router does) and the CPU does not,
// so a token whose k-th and (k+1)-th logits are closer than the rounding could route differently:
// such tokens (rare with these scales) are left out and counted.
#include <numeric>

#include "cuda_test_util.h"

namespace vireo::testing {
namespace {

struct MoeCase {
  int T, hidden, inter, E, k;
  bool renorm;
};

// Smallest gap between the k-th and (k+1)-th router logits of token t (fp32, test-side).
float topk_gap(const std::vector<float>& x, const std::vector<float>& router, int t, const MoeCase& c) {
  std::vector<float> l(c.E);
  for (int e = 0; e < c.E; ++e) {
    double s = 0;
    for (int h = 0; h < c.hidden; ++h) s += double(x[size_t(t) * c.hidden + h]) * router[size_t(e) * c.hidden + h];
    l[e] = float(s);
  }
  std::sort(l.begin(), l.end(), std::greater<float>());
  return c.k < c.E ? l[c.k - 1] - l[c.k] : 1e9f;
}

TEST_F(CudaOpsTest, MoeMatchesCpu) {
  for (DType act : {DType::kBF16, DType::kF32}) {
    use_dtype(act);
    Tolerance tol = tol_for(act);
    if (act == DType::kBF16) tol = {3e-2f, 3e-2f};  // six roundings to bf16 along the expert path
    int compared = 0, skipped = 0;
    for (MoeCase c : {MoeCase{1, 64, 48, 8, 2, true}, MoeCase{3, 128, 96, 60, 4, true}, MoeCase{37, 64, 20, 6, 3, false},
                      MoeCase{2, 72, 40, 16, 1, false}, MoeCase{5, 256, 64, 128, 8, true}}) {
      SCOPED_TRACE(std::string(dtype_name(act)) + " T " + std::to_string(c.T) + " hidden " + std::to_string(c.hidden) +
                   " I " + std::to_string(c.inter) + " E " + std::to_string(c.E) + " k " + std::to_string(c.k));
      auto x = rand_vec(size_t(c.T) * c.hidden, -1, 1, act);
      auto router = rand_vec(size_t(c.E) * c.hidden, -0.5f, 0.5f, act);
      auto gu = rand_vec(size_t(c.E) * 2 * c.inter * c.hidden, -0.2f, 0.2f, act);
      auto down = rand_vec(size_t(c.E) * c.hidden * c.inter, -0.2f, 0.2f, act);
      Tensor out = gpu_poisoned({c.T, c.hidden}, act);
      MoeParams g{gpu_from(x, {c.T, c.hidden}, act), gpu_from(router, {c.E, c.hidden}, act),
                  gpu_from(gu, {c.E, 2 * c.inter, c.hidden}, act), gpu_from(down, {c.E, c.hidden, c.inter}, act), out,
                  c.k, c.renorm};
      gpu_->moe(g);
      Tensor ref = cpu_poisoned({c.T, c.hidden});
      cpu_->moe({cpu_f32(x, {c.T, c.hidden}), cpu_f32(router, {c.E, c.hidden}), cpu_f32(gu, {c.E, 2 * c.inter, c.hidden}),
                 cpu_f32(down, {c.E, c.hidden, c.inter}), ref, c.k, c.renorm});
      const auto got = to_host(out), want = to_host(ref);
      std::vector<float> got_kept, want_kept;
      for (int t = 0; t < c.T; ++t) {
        if (topk_gap(x, router, t, c) < 0.05f) {
          ++skipped;
          continue;
        }
        ++compared;
        got_kept.insert(got_kept.end(), got.begin() + size_t(t) * c.hidden, got.begin() + size_t(t + 1) * c.hidden);
        want_kept.insert(want_kept.end(), want.begin() + size_t(t) * c.hidden, want.begin() + size_t(t + 1) * c.hidden);
      }
      expect_close(got_kept, want_kept, tol, "moe");
      for (float v : got) ASSERT_FALSE(std::isnan(v)) << "moe left an output element unwritten";
    }
    EXPECT_GT(compared, 4 * skipped) << "too many near-tied routings to check";
  }
}

TEST_F(CudaOpsTest, MoeRejectsBadShapes) {
  use_dtype(DType::kBF16);
  auto v = rand_vec(64 * 8, -1, 1, DType::kBF16);
  Tensor x = gpu_from(v, {8, 64}, DType::kBF16), router = gpu_from(v, {8, 64}, DType::kBF16);
  auto w = rand_vec(8 * 2 * 16 * 64, -1, 1, DType::kBF16);
  Tensor gu = gpu_from(w, {8, 32, 64}, DType::kBF16), down = gpu_from(w, {8, 64, 16}, DType::kBF16);
  Tensor out = gpu_poisoned({8, 64}, DType::kBF16);
  EXPECT_THROW(gpu_->moe({x, router, gu, down, out, 9, true}), Error);   // top_k > E
  EXPECT_THROW(gpu_->moe({x, router, gu, down, x, 2, true}), Error);     // out aliases x
  EXPECT_THROW(gpu_->moe({x, router, down, gu, out, 2, true}), Error);   // swapped expert tensors
}

}  // namespace
}  // namespace vireo::testing
