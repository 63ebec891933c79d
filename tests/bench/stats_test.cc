// Percentile / mean / std against hand-computed numpy values.
#include <gtest/gtest.h>

#include "bench/stats.h"
#include "core/error.h"

using namespace vireo::bench;

TEST(BenchStats, PercentileLinearInterpolation) {
  // numpy.percentile([1, 2, 3, 4], p): rank = p/100 * 3.
  std::vector<double> xs{4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(percentile(xs, 50), 2.5);
  EXPECT_NEAR(percentile(xs, 99), 3.97, 1e-12);
  EXPECT_DOUBLE_EQ(percentile(xs, 0), 1.0);
  EXPECT_DOUBLE_EQ(percentile(xs, 100), 4.0);
  EXPECT_NEAR(percentile({10, 20, 30}, 90), 28.0, 1e-12);   // rank 1.8
  EXPECT_NEAR(percentile({10, 20, 30}, 25), 15.0, 1e-12);   // rank 0.5
  EXPECT_DOUBLE_EQ(percentile({7}, 99), 7.0);
  EXPECT_DOUBLE_EQ(median({5, 1, 3}), 3.0);
  EXPECT_DOUBLE_EQ(median({5, 1, 3, 2}), 2.5);
}

TEST(BenchStats, MeanStdPopulation) {
  std::vector<double> xs{2, 4, 4, 4, 5, 5, 7, 9};
  EXPECT_DOUBLE_EQ(mean(xs), 5.0);
  EXPECT_DOUBLE_EQ(stddev(xs), 2.0);  // numpy default ddof=0
}

TEST(BenchStats, EmptyIsZero) {
  EXPECT_EQ(mean({}), 0.0);
  EXPECT_EQ(stddev({}), 0.0);
  EXPECT_EQ(percentile({}, 99), 0.0);
}

TEST(BenchStats, BadPercentileThrows) {
  EXPECT_THROW(percentile({1.0}, 101), vireo::Error);
  EXPECT_THROW(percentile({1.0}, -1), vireo::Error);
}
