// cpu::range_stats (the oracle of LinearParams::row_stats) and the CPU linear writing them.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_range_stats.h"
#include "core/error.h"

namespace vireo {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Ranges of the even split, -inf skipped, ties to the lowest id, empty ranges.
TEST(RangeStats, EvenSplitAndEdges) {
  const std::vector<float> row = {1.f, 3.f, 3.f, -kInf, -kInf, 0.5f, 2.f};
  std::vector<RangeStats> s(3);
  cpu::range_stats(row.data(), 7, 3, s.data());  // ranges [0, 3), [3, 5), [5, 7)
  EXPECT_EQ(s[0].max, 3.f);
  EXPECT_EQ(s[0].best_value, 3.f);
  EXPECT_EQ(s[0].best_id, 1);
  EXPECT_NEAR(s[0].sum, std::exp(-2.f) + 2.f, 1e-6f);
  EXPECT_EQ(s[1].max, -kInf);
  EXPECT_EQ(s[1].sum, 0.f);
  EXPECT_EQ(s[1].best_id, std::numeric_limits<int32_t>::max());
  EXPECT_EQ(s[2].best_id, 6);
  EXPECT_EQ(range_begin(7, 3, 1), 3);
  EXPECT_EQ(range_begin(7, 3, 3), 7);
  std::vector<RangeStats> e(5);
  cpu::range_stats(row.data(), 2, 5, e.data());  // more ranges than values: [0, 1), [1, 2), then empty
  EXPECT_EQ(e[1].best_id, 1);
  EXPECT_EQ(e[4].max, -kInf);
}

// The CPU linear honours row_stats: the statistics of its own output rows.
TEST(RangeStats, CpuLinearWritesThem) {
  auto be = create_backend("cpu");
  const int64_t n = 2, k = 3, m = 10, c = 4;
  std::vector<float> x = {1, 2, 3, -1, 0.5f, 2}, w(m * k), out(n * m), stats(n * c * 4, std::nanf(""));
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(static_cast<float>(i));
  LinearParams p{Tensor(x.data(), DType::kF32, {n, k}), Tensor(w.data(), DType::kF32, {m, k}), Tensor(),
                 Tensor(out.data(), DType::kF32, {n, m})};
  p.row_stats = Tensor(stats.data(), DType::kF32, {n, c, 4});
  be->linear(p);
  std::vector<RangeStats> want(n * c);
  for (int64_t r = 0; r < n; ++r) cpu::range_stats(out.data() + r * m, m, c, want.data() + r * c);
  const RangeStats* got = reinterpret_cast<const RangeStats*>(stats.data());
  for (int64_t i = 0; i < n * c; ++i) {
    EXPECT_EQ(got[i].max, want[i].max) << i;
    EXPECT_EQ(got[i].sum, want[i].sum) << i;
    EXPECT_EQ(got[i].best_id, want[i].best_id) << i;
  }
  EXPECT_EQ(be->row_stats_ranges(m), 0) << "the CPU sample op reads the rows anyway";
  p.row_stats = Tensor(stats.data(), DType::kF32, {n + 1, c, 4});
  EXPECT_THROW(be->linear(p), Error);
}

}  // namespace
}  // namespace vireo
