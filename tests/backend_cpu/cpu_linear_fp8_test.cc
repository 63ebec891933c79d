// The CPU linear with FP8 E4M3 weights and per-row scales (cpu_linear_fp8.cc; --quantization fp8) against a
// double-precision dot of the dequantized weights (code x scale, core/fp8.h), for decode row counts (the
// AVX-512, AVX2 + F16C and table kernels, which must agree bit for bit) and larger ones (dequantized bands
// through SGEMM); every code 0x00-0xFE but the NaNs appears, subnormals included. Outputs NaN-poisoned
// first. Decode rows give each row the same bits whatever the row count. Also through the backend with
// the decode fusions and a bias, against the same ops on the dense dequantized matrix.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/thread_pool.h"
#include "core/error.h"
#include "core/fp8.h"

namespace vireo {
namespace {

struct Fp8Matrix8 {
  int64_t m, k;
  std::vector<uint8_t> codes;  // [m, k]
  std::vector<float> scale;    // [m]
  std::vector<float> dense;    // [m, k] = code x scale in f32
  Tensor view() {
    Tensor t(codes.data(), DType::kF8E4M3, {m, k});
    t.row_scale = scale.data();
    return t;
  }
};

Fp8Matrix8 random_fp8(std::mt19937& rng, int64_t m, int64_t k) {
  Fp8Matrix8 w{m, k};
  w.codes.resize(static_cast<size_t>(m * k));
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& c : w.codes) {
    do c = static_cast<uint8_t>(byte(rng));
    while ((c & 0x7F) == 0x7F);  // no NaN codes (the quantizer never makes them)
  }
  std::uniform_real_distribution<float> s(1e-4f, 1e-3f);
  for (int64_t r = 0; r < m; ++r) w.scale.push_back(s(rng));
  for (int64_t i = 0; i < m * k; ++i) w.dense.push_back(fp8_e4m3_to_f32(w.codes[i]) * w.scale[i / k]);
  return w;
}

std::vector<float> reference(const std::vector<float>& x, int64_t n, const Fp8Matrix8& w) {
  std::vector<float> y(static_cast<size_t>(n * w.m));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < w.m; ++j) {
      double acc = 0;
      for (int64_t i = 0; i < w.k; ++i) acc += double(x[r * w.k + i]) * w.dense[j * w.k + i];
      y[r * w.m + j] = static_cast<float>(acc);
    }
  return y;
}

void expect_near_all(const std::vector<float>& got, const std::vector<float>& want, const std::vector<float>& x,
                     int64_t n, const Fp8Matrix8& w, const char* what) {
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < w.m; ++j) {
      double mag = 0;  // fp32 summation error scales with sum |x w|
      for (int64_t i = 0; i < w.k; ++i) mag += std::fabs(double(x[r * w.k + i]) * w.dense[j * w.k + i]);
      const size_t at = static_cast<size_t>(r * w.m + j);
      ASSERT_TRUE(std::isfinite(got[at])) << what << " row " << r << " col " << j;
      ASSERT_NEAR(got[at], want[at], 1e-5 * mag + 1e-12) << what << " row " << r << " col " << j;
    }
}

TEST(CpuLinearFp8, DecodeAndPrefillRowsMatchTheDequantizedDot) {
  std::mt19937 rng(7);
  ThreadPool pool(2);
  for (auto [m, k] : std::vector<std::pair<int64_t, int64_t>>{{1, 16}, {37, 64}, {64, 1040}, {300, 512}}) {
    Fp8Matrix8 w = random_fp8(rng, m, k);
    std::vector<std::vector<float>> solo;  // row 0's result alone, per kernel
    for (int64_t n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 33}) {
      std::uniform_real_distribution<float> u(-2.f, 2.f);
      std::vector<float> x(static_cast<size_t>(n * k));
      for (auto& v : x) v = u(rng);
      const std::vector<float> want = reference(x, n, w);
      std::vector<float> fast(n * m, std::numeric_limits<float>::quiet_NaN()), avx2 = fast, portable = fast;
      cpu::linear_fp8(pool, x.data(), n, k, w.view(), m, fast.data());
      cpu::linear_fp8(pool, x.data(), n, k, w.view(), m, avx2.data(), cpu::Fp8Kernel::kAvx2);
      cpu::linear_fp8(pool, x.data(), n, k, w.view(), m, portable.data(), cpu::Fp8Kernel::kPortable);
      SCOPED_TRACE("M " + std::to_string(m) + " K " + std::to_string(k) + " N " + std::to_string(n));
      expect_near_all(fast, want, x, n, w, "auto");
      if (n <= cpu::kGemvMaxRows) {
        EXPECT_EQ(fast, portable) << "the widest kernel and the table kernel differ";
        EXPECT_EQ(avx2, portable) << "the AVX2 + F16C and table kernels differ";
        // Row 0 alone gives the same bits as inside a batch (the decode kernels' sum order is fixed).
        std::vector<float> one(m);
        cpu::linear_fp8(pool, x.data(), 1, k, w.view(), m, one.data());
        EXPECT_TRUE(std::equal(one.begin(), one.end(), fast.begin())) << "batch-variant row 0";
      }
    }
  }
}

TEST(CpuLinearFp8, BackendFusionsAndBiasMatchTheDenseMatrix) {
  std::mt19937 rng(11);
  auto be = create_backend("cpu");
  ASSERT_TRUE(be->supports_fp8_linear());
  const int64_t k = 256, m = 96;
  Fp8Matrix8 w = random_fp8(rng, m, k);
  Tensor dense(w.dense.data(), DType::kF32, {m, k});
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> bias(m), norm(k);
  for (auto& v : bias) v = u(rng);
  for (auto& v : norm) v = 1.f + 0.5f * u(rng);
  for (int64_t n : {1, 3, 8, 12}) {
    SCOPED_TRACE("N " + std::to_string(n));
    std::vector<float> x(n * k), res(n * m);
    for (auto& v : x) v = u(rng);
    for (auto& v : res) v = u(rng);
    // input_norm + bias + residual, against the dense F32 matrix through the same fused op.
    std::vector<float> got_res = res, want_res = res;
    for (auto [weights, out] : {std::pair<Tensor, std::vector<float>*>{w.view(), &got_res}, {dense, &want_res}}) {
      LinearParams p{Tensor(x.data(), DType::kF32, {n, k}), weights, Tensor(bias.data(), DType::kF32, {m}),
                     Tensor(out->data(), DType::kF32, {n, m})};
      p.input_norm = Tensor(norm.data(), DType::kF32, {k});
      p.residual = p.out;
      be->linear(p);
    }
    for (int64_t i = 0; i < n * m; ++i) ASSERT_NEAR(got_res[i], want_res[i], 1e-4f * (1 + std::fabs(want_res[i]))) << i;
    // silu_mul_output (w as [2I, K]).
    std::vector<float> got(n * m / 2, std::numeric_limits<float>::quiet_NaN()), want(n * m / 2);
    for (auto [weights, out] : {std::pair<Tensor, std::vector<float>*>{w.view(), &got}, {dense, &want}}) {
      LinearParams p{Tensor(x.data(), DType::kF32, {n, k}), weights, Tensor(), Tensor(out->data(), DType::kF32, {n, m / 2})};
      p.silu_mul_output = true;
      be->linear(p);
    }
    for (int64_t i = 0; i < n * m / 2; ++i) ASSERT_NEAR(got[i], want[i], 1e-4f * (1 + std::fabs(want[i]))) << i;
  }
}

TEST(CpuLinearFp8, RefusesRowsNotMultiplesOf16AndMissingScales) {
  ThreadPool pool(1);
  std::vector<uint8_t> codes(4 * 24, 0x38);
  std::vector<float> scale(4, 1.f), x(24), out(4);
  Tensor w(codes.data(), DType::kF8E4M3, {4, 24});
  w.row_scale = scale.data();
  EXPECT_THROW(cpu::linear_fp8(pool, x.data(), 1, 24, w, 4, out.data()), Error);
  Tensor w16(codes.data(), DType::kF8E4M3, {4, 16});
  EXPECT_THROW(cpu::linear_fp8(pool, x.data(), 1, 16, w16, 4, out.data()), Error);  // no row_scale
}

}  // namespace
}  // namespace vireo
