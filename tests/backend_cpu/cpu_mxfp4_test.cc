// The CPU MXFP4 linear (cpu_mxfp4.cc) against a double-precision dot of the weights mxfp4_dequantize gives
// (the loader's dequantization), for decode row counts (fused decode-and-dot) and larger ones (dequantized
// bands through SGEMM), AVX2 and portable kernels: random nibbles (negative zero among them), scales of
// every size including 0 (subnormal weights) and 255 (infinite ones), with and without a bias; outputs
// NaN-poisoned first. Decode rows give each row the same bits whatever the row count.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "core/error.h"
#include "model/mxfp4.h"

namespace vireo {
namespace {

struct Mxfp4Matrix {
  int64_t m, k;
  std::vector<uint8_t> blocks, scales;  // [m, k / 2], [m, k / 32]
  std::vector<float> dense;             // [m, k], as the loader dequantizes it
  Tensor blocks_view() { return Tensor(blocks.data(), DType::kU8, {m, k / 2}); }
  Tensor scales_view() { return Tensor(scales.data(), DType::kU8, {m, k / 32}); }
};

// Scales around 2^0 (bytes 120-134), so dots stay finite.
Mxfp4Matrix random_matrix(std::mt19937& rng, int64_t m, int64_t k) {
  Mxfp4Matrix w{m, k};
  std::uniform_int_distribution<int> byte(0, 255), scale(120, 134);
  w.blocks.resize(size_t(m * k / 2));
  w.scales.resize(size_t(m * k / 32));
  for (auto& b : w.blocks) b = static_cast<uint8_t>(byte(rng));
  for (auto& s : w.scales) s = static_cast<uint8_t>(scale(rng));
  return w;
}

void dequantize(Mxfp4Matrix& w) {
  w.dense.resize(size_t(w.m * w.k));
  mxfp4_dequantize(w.blocks.data(), w.scales.data(), w.m, w.k / 32, w.dense.data());
}

// out [n, m] through linear_mxfp4 (NaN-poisoned first).
std::vector<float> run(ThreadPool& pool, const std::vector<float>& x, int64_t n, Mxfp4Matrix& w,
                       const std::vector<float>& bias, cpu::Mxfp4Kernel kernel) {
  std::vector<float> out(size_t(n * w.m), std::numeric_limits<float>::quiet_NaN());
  Tensor b = bias.empty() ? Tensor() : Tensor(const_cast<float*>(bias.data()), DType::kF32, {w.m});
  cpu::linear_mxfp4(pool, Tensor(const_cast<float*>(x.data()), DType::kF32, {n, w.k}), w.blocks_view(), w.scales_view(),
                    b, Tensor(out.data(), DType::kF32, {n, w.m}), kernel);
  return out;
}

// Every output against sum_i x[r, i] * dense[j, i] + bias[j] in double: within 1e-5 of sum |x w| (+ |bias|).
void expect_matches_dense(const std::vector<float>& got, const std::vector<float>& x, int64_t n, const Mxfp4Matrix& w,
                          const std::vector<float>& bias) {
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < w.m; ++j) {
      double want = bias.empty() ? 0.0 : bias[j], mag = std::fabs(want);
      for (int64_t i = 0; i < w.k; ++i) {
        const double t = double(x[r * w.k + i]) * w.dense[j * w.k + i];
        want += t;
        mag += std::fabs(t);
      }
      const float g = got[r * w.m + j];
      if (!std::isfinite(want)) {  // infinite weights: the same inf, or NaN where both signs meet
        ASSERT_EQ(std::isnan(g), std::isnan(want)) << r << "," << j << ": " << g << " vs " << want;
        if (!std::isnan(want)) ASSERT_EQ(g, want) << r << "," << j;
        continue;
      }
      // + 64 subnormal steps per value: products of scale-0 weights round to multiples of 2^-149.
      ASSERT_NEAR(g, want, 1e-5 * mag + w.k * 64 * std::ldexp(1.0, -149)) << r << "," << j;
    }
}

TEST(CpuMxfp4, MatchesDequantizedDenseForDecodeAndBatchRows) {
  ThreadPool pool(4);
  std::mt19937 rng{7};
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int64_t k : {32, 96, 2880}) {
    Mxfp4Matrix w = random_matrix(rng, 53, k);
    dequantize(w);
    std::vector<float> bias(size_t(w.m));
    for (auto& b : bias) b = nd(rng);
    for (int64_t n : {1, 3, 8, 9, 40}) {
      std::vector<float> x(size_t(n * k));
      for (auto& v : x) v = nd(rng);
      for (auto kernel : {cpu::Mxfp4Kernel::kAuto, cpu::Mxfp4Kernel::kPortable})
        for (bool with_bias : {false, true}) {
          SCOPED_TRACE("k " + std::to_string(k) + " n " + std::to_string(n) + " portable " +
                       std::to_string(kernel == cpu::Mxfp4Kernel::kPortable) + " bias " + std::to_string(with_bias));
          const std::vector<float> b = with_bias ? bias : std::vector<float>();
          expect_matches_dense(run(pool, x, n, w, b, kernel), x, n, w, b);
        }
    }
  }
}

// Scale bytes 0 (weights down to 2^-128, subnormal), 1, 254 and 255 (6 * 2^128 = inf, 0.5 * 2^128 = 2^127),
// and rows of only negative zeros (nibble 8), against the same dequantized weights.
TEST(CpuMxfp4, ExtremeScalesAndNegativeZeroDecodeAsDequantized) {
  ThreadPool pool(3);
  std::mt19937 rng{19};
  std::uniform_real_distribution<float> small(-1e-3f, 1e-3f);
  const int64_t m = 12, k = 64;
  Mxfp4Matrix w = random_matrix(rng, m, k);
  const uint8_t extremes[4] = {0, 1, 254, 255};
  for (int64_t j = 0; j < 8; ++j)
    for (int64_t g = 0; g < k / 32; ++g) w.scales[j * (k / 32) + g] = extremes[(j + g) % 4];
  for (int64_t j = 8; j < 10; ++j)
    for (int64_t i = 0; i < k / 2; ++i) w.blocks[j * (k / 2) + i] = 0x88;  // -0, -0
  w.blocks[10 * (k / 2)] = 0x18;  // row 10: -0 then 0.5
  dequantize(w);
  for (int64_t n : {1, 4, 9}) {
    std::vector<float> x(size_t(n * k));
    for (auto& v : x) v = small(rng);  // products of 2^127-sized weights stay finite
    for (auto kernel : {cpu::Mxfp4Kernel::kAuto, cpu::Mxfp4Kernel::kPortable}) {
      SCOPED_TRACE("n " + std::to_string(n) + " portable " + std::to_string(kernel == cpu::Mxfp4Kernel::kPortable));
      const std::vector<float> got = run(pool, x, n, w, {}, kernel);
      expect_matches_dense(got, x, n, w, {});
      for (int64_t r = 0; r < n; ++r) {
        EXPECT_EQ(got[r * m + 8], 0.0f);
        EXPECT_EQ(got[r * m + 9], 0.0f);
      }
    }
  }
}

TEST(CpuMxfp4, DecodeRowsAreIndependentOfTheRowCount) {
  ThreadPool pool(4);
  std::mt19937 rng{23};
  std::normal_distribution<float> nd(0.0f, 1.0f);
  Mxfp4Matrix w = random_matrix(rng, 45, 320);
  std::vector<float> x(size_t(cpu::kGemvMaxRows * w.k));
  for (auto& v : x) v = nd(rng);
  for (auto kernel : {cpu::Mxfp4Kernel::kAuto, cpu::Mxfp4Kernel::kPortable}) {
    const std::vector<float> one = run(pool, x, 1, w, {}, kernel);
    for (int64_t n = 2; n <= cpu::kGemvMaxRows; ++n) {
      const std::vector<float> many = run(pool, x, n, w, {}, kernel);
      for (int64_t j = 0; j < w.m; ++j) ASSERT_EQ(many[j], one[j]) << "n " << n << " column " << j;
    }
  }
}

TEST(CpuMxfp4, RejectsBadShapes) {
  ThreadPool pool(1);
  std::vector<float> x(64), out(64);
  std::vector<uint8_t> blocks(1024), scales(64);
  const Tensor xt(x.data(), DType::kF32, {1, 48}), ot(out.data(), DType::kF32, {1, 2});
  // k = 48: not a multiple of 32.
  EXPECT_THROW(cpu::linear_mxfp4(pool, xt, Tensor(blocks.data(), DType::kU8, {2, 24}),
                                 Tensor(scales.data(), DType::kU8, {2, 1}), Tensor(), ot),
               Error);
  const Tensor x64(x.data(), DType::kF32, {1, 64});
  // scales of the wrong width, and not U8.
  EXPECT_THROW(cpu::linear_mxfp4(pool, x64, Tensor(blocks.data(), DType::kU8, {2, 32}),
                                 Tensor(scales.data(), DType::kU8, {2, 1}), Tensor(), ot),
               Error);
  EXPECT_THROW(cpu::linear_mxfp4(pool, x64, Tensor(blocks.data(), DType::kU8, {2, 32}),
                                 Tensor(x.data(), DType::kF32, {2, 2}), Tensor(), ot),
               Error);
  EXPECT_NO_THROW(cpu::linear_mxfp4(pool, x64, Tensor(blocks.data(), DType::kU8, {2, 32}),
                                    Tensor(scales.data(), DType::kU8, {2, 2}), Tensor(), ot));
}

}  // namespace
}  // namespace vireo
