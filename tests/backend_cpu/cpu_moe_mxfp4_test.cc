// The CPU MoE op with MXFP4 experts (MoeParams gate_up_scales / down_scales) against the same op over the
// same experts dequantized to F32 (what the loader's opt-out, VIREO_MXFP4=dequantize, runs): GPT-OSS's form
// (router and expert biases, clamped SwiGLU) and the plain one (SiLU), at one token (each expert's rows by
// the decode GEMV) and at 20 (experts chosen by more than kGemvMaxRows tokens take the SGEMM path).
// The routing is the same (the router is dense in both); the products differ only in fp32 summation order.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "core/error.h"
#include "model/mxfp4.h"

namespace vireo {
namespace {

std::vector<float> randu(std::mt19937& rng, size_t n, float a) {
  std::uniform_real_distribution<float> d(-a, a);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// E stacked [rows, cols] MXFP4 matrices: blocks [E, rows, cols / 2], scales [E, rows, cols / 32] (bytes
// 122-126: values up to 6 * 2^-1), and the same values dequantized [E, rows, cols].
struct Experts {
  int64_t E, rows, cols;
  std::vector<uint8_t> blocks, scales;
  std::vector<float> dense;
  Tensor packed() { return Tensor(blocks.data(), DType::kU8, {E, rows, cols / 2}); }
  Tensor scale_view() { return Tensor(scales.data(), DType::kU8, {E, rows, cols / 32}); }
  Tensor dense_view() { return Tensor(dense.data(), DType::kF32, {E, rows, cols}); }
};

Experts random_experts(std::mt19937& rng, int64_t E, int64_t rows, int64_t cols) {
  Experts x{E, rows, cols};
  std::uniform_int_distribution<int> byte(0, 255), scale(122, 126);
  x.blocks.resize(size_t(E * rows * cols / 2));
  x.scales.resize(size_t(E * rows * cols / 32));
  for (auto& b : x.blocks) b = static_cast<uint8_t>(byte(rng));
  for (auto& s : x.scales) s = static_cast<uint8_t>(scale(rng));
  x.dense.resize(size_t(E * rows * cols));
  mxfp4_dequantize(x.blocks.data(), x.scales.data(), E * rows, cols / 32, x.dense.data());
  return x;
}

TEST(CpuMoeMxfp4, MatchesTheDequantizedExperts) {
  auto be = create_backend("cpu");
  std::mt19937 rng(5);
  const int64_t H = 64, I = 96, E = 4;
  for (bool gpt_oss : {false, true})
    for (int64_t T : {1, 20}) {
      SCOPED_TRACE(std::string(gpt_oss ? "gpt-oss" : "plain") + " T " + std::to_string(T));
      Experts gu = random_experts(rng, E, 2 * I, H), down = random_experts(rng, E, H, I);
      auto x = randu(rng, size_t(T * H), 0.5f), router = randu(rng, size_t(E * H), 0.5f);
      auto router_b = randu(rng, E, 0.5f), gu_b = randu(rng, size_t(E * 2 * I), 1.0f);
      auto down_b = randu(rng, size_t(E * H), 1.0f);
      std::vector<float> want(size_t(T * H), std::numeric_limits<float>::quiet_NaN()), got = want;
      MoeParams p;
      p.x = Tensor(x.data(), DType::kF32, {T, H});
      p.router_w = Tensor(router.data(), DType::kF32, {E, H});
      p.top_k = 2;
      if (gpt_oss) {
        p.router_b = Tensor(router_b.data(), DType::kF32, {E});
        p.gate_up_b = Tensor(gu_b.data(), DType::kF32, {E, 2 * I});
        p.down_b = Tensor(down_b.data(), DType::kF32, {E, H});
        p.swiglu_limit = 7.0f;
      }
      p.gate_up_w = gu.dense_view();
      p.down_w = down.dense_view();
      p.out = Tensor(want.data(), DType::kF32, {T, H});
      be->moe(p);
      p.gate_up_w = gu.packed();
      p.gate_up_scales = gu.scale_view();
      p.down_w = down.packed();
      p.down_scales = down.scale_view();
      ASSERT_TRUE(p.mxfp4());
      ASSERT_EQ(p.inter(), I);
      p.out = Tensor(got.data(), DType::kF32, {T, H});
      be->moe(p);
      float scale = 0;
      for (float v : want) scale = std::max(scale, std::fabs(v));
      ASSERT_GT(scale, 0.1f);
      for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 2e-5f * scale) << i;
    }
}

TEST(CpuMoeMxfp4, RejectsInconsistentExperts) {
  auto be = create_backend("cpu");
  std::mt19937 rng(9);
  const int64_t T = 2, H = 64, I = 32, E = 2;
  Experts gu = random_experts(rng, E, 2 * I, H), down = random_experts(rng, E, H, I);
  auto x = randu(rng, size_t(T * H), 0.5f), router = randu(rng, size_t(E * H), 0.5f);
  std::vector<float> out(size_t(T * H));
  MoeParams p;
  p.x = Tensor(x.data(), DType::kF32, {T, H});
  p.router_w = Tensor(router.data(), DType::kF32, {E, H});
  p.gate_up_w = gu.packed();
  p.gate_up_scales = gu.scale_view();
  p.down_w = down.packed();
  p.down_scales = down.scale_view();
  p.out = Tensor(out.data(), DType::kF32, {T, H});
  EXPECT_NO_THROW(be->moe(p));
  MoeParams one_scale = p;  // both scales or neither
  one_scale.down_scales = Tensor();
  EXPECT_THROW(be->moe(one_scale), Error);
  MoeParams swapped = p;  // gate_up's scales where down's belong
  swapped.down_scales = gu.scale_view();
  EXPECT_THROW(be->moe(swapped), Error);
  MoeParams dense_gu = p;  // F32 weights with scales
  dense_gu.gate_up_w = gu.dense_view();
  EXPECT_THROW(be->moe(dense_gu), Error);
}

}  // namespace
}  // namespace vireo
