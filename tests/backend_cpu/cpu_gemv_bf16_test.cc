// The CPU decode GEMV over BF16 weights (cpu_gemv_bf16.cc, linear with n <= kGemvMaxRows rows): every
// output against a double-precision dot of the widened weights, for row counts 1..8 and K not a multiple
// of its 16 lanes; outputs NaN-poisoned first; and each row's bits independent of the row count.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "backend/backend.h"

namespace vireo {
namespace {

TEST(CpuGemvBf16, MatchesWidenedDotAndIsRowInvariant) {
  auto be = create_backend("cpu");
  std::mt19937 rng{11};
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int64_t k : {16, 37, 1024, 3000}) {
    const int64_t m = 67;
    std::vector<uint16_t> w(size_t(m * k));
    for (auto& v : w) v = f32_to_bf16(nd(rng));
    std::vector<float> x(size_t(8 * k));
    for (auto& v : x) v = nd(rng);
    Tensor wt(w.data(), DType::kBF16, {m, k});
    std::vector<float> first_row;
    for (int64_t n = 1; n <= 8; ++n) {
      SCOPED_TRACE("k " + std::to_string(k) + " n " + std::to_string(n));
      std::vector<float> out(size_t(n * m), std::numeric_limits<float>::quiet_NaN());
      LinearParams p{Tensor(x.data(), DType::kF32, {n, k}), wt, Tensor(), Tensor(out.data(), DType::kF32, {n, m})};
      be->linear(p);
      for (int64_t r = 0; r < n; ++r)
        for (int64_t j = 0; j < m; ++j) {
          double want = 0, mag = 0;
          for (int64_t i = 0; i < k; ++i) {
            const double t = double(x[r * k + i]) * bf16_to_f32(w[j * k + i]);
            want += t;
            mag += std::fabs(t);
          }
          ASSERT_NEAR(out[r * m + j], want, 1e-5 * mag + 1e-6) << "row " << r << " col " << j;
        }
      // Row 0 gives the same bits whatever the row count.
      std::vector<float> row0(out.begin(), out.begin() + m);
      if (n == 1) first_row = row0;
      EXPECT_EQ(row0, first_row);
    }
  }
}

}  // namespace
}  // namespace vireo
