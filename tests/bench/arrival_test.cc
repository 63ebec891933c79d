// Arrival processes: gamma gaps with shape = burstiness and mean 1/rate.
#include <gtest/gtest.h>

#include <cmath>

#include "bench/arrival.h"
#include "bench/stats.h"
#include "core/error.h"

using namespace vireo::bench;

namespace {
struct GapStats {
  double mean, var;
};
GapStats draw(double rate, double burstiness, int n, uint64_t seed) {
  ArrivalProcess p(rate, burstiness, seed);
  std::vector<double> gaps(n);
  for (auto& g : gaps) g = p.next_gap_s();
  double sd = stddev(gaps);
  return {mean(gaps), sd * sd};
}
}  // namespace

TEST(BenchArrival, PoissonMeanRateAndVariance) {
  // Exponential gaps: mean 1/rate, variance 1/rate^2.
  const double rate = 20.0;
  auto s = draw(rate, 1.0, 200000, 1);
  EXPECT_NEAR(s.mean, 1.0 / rate, 0.02 / rate);
  EXPECT_NEAR(s.var, 1.0 / (rate * rate), 0.05 / (rate * rate));
}

TEST(BenchArrival, BurstinessChangesVarianceNotMean) {
  // Gamma(k, 1/(rate k)): mean 1/rate, variance 1/(k rate^2).
  const double rate = 5.0;
  for (double k : {0.25, 0.5, 2.0, 8.0}) {
    auto s = draw(rate, k, 200000, 7);
    EXPECT_NEAR(s.mean, 1.0 / rate, 0.02 / rate) << "burstiness " << k;
    double want_var = 1.0 / (k * rate * rate);
    EXPECT_NEAR(s.var, want_var, 0.08 * want_var) << "burstiness " << k;
  }
  // Burstier (k < 1) means more variance than Poisson, smoother (k > 1) less.
  EXPECT_GT(draw(rate, 0.5, 50000, 3).var, draw(rate, 1.0, 50000, 3).var);
  EXPECT_LT(draw(rate, 4.0, 50000, 3).var, draw(rate, 1.0, 50000, 3).var);
}

TEST(BenchArrival, OffsetsAreCumulativeAndSeeded) {
  auto a = arrival_offsets(1000, 100.0, 1.0, 42);
  auto b = arrival_offsets(1000, 100.0, 1.0, 42);
  auto c = arrival_offsets(1000, 100.0, 1.0, 43);
  ASSERT_EQ(a.size(), 1000u);
  EXPECT_EQ(a[0], 0.0);
  for (size_t i = 1; i < a.size(); ++i) EXPECT_GE(a[i], a[i - 1]);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  // 999 gaps of mean 10 ms: the last arrival is near 9.99 s.
  EXPECT_NEAR(a.back(), 9.99, 1.0);
}

TEST(BenchArrival, InfiniteRateIsInstant) {
  auto a = arrival_offsets(50, INFINITY, 1.0, 0);
  for (double t : a) EXPECT_EQ(t, 0.0);
}

TEST(BenchArrival, RejectsBadParameters) {
  EXPECT_THROW(ArrivalProcess(0.0, 1.0, 0), vireo::Error);
  EXPECT_THROW(ArrivalProcess(-1.0, 1.0, 0), vireo::Error);
  EXPECT_THROW(ArrivalProcess(1.0, 0.0, 0), vireo::Error);
}

// vLLM's --ramp-up-strategy: the rate moves from start to end with the request's progress, so the early
// gaps are longer than the late ones; seeded; bad settings are refused.
TEST(BenchArrival, RampUpSpeedsUp) {
  for (const char* strategy : {"linear", "exponential"}) {
    SCOPED_TRACE(strategy);
    const vireo::bench::RampUp ramp{strategy, 10.0, 1000.0};
    auto a = vireo::bench::arrival_offsets(2001, ramp, 1.0, 7);
    ASSERT_EQ(a.size(), 2001u);
    EXPECT_EQ(a[0], 0.0);
    EXPECT_EQ(a, vireo::bench::arrival_offsets(2001, ramp, 1.0, 7));
    const double early = a[200] - a[0], late = a[2000] - a[1800];  // 200 gaps each
    EXPECT_GT(early, 3 * late);
    for (size_t i = 1; i < a.size(); ++i) EXPECT_GE(a[i], a[i - 1]);
  }
  // Linear from 0: the first gap takes rate 0 as "no wait"; mean gap near the end ~1/end.
  auto z = vireo::bench::arrival_offsets(11, vireo::bench::RampUp{"linear", 0.0, 100.0}, 1.0, 1);
  EXPECT_EQ(z[1], 0.0);
  EXPECT_THROW(vireo::bench::check_ramp_up({"sideways", 1, 2}), vireo::Error);
  EXPECT_THROW(vireo::bench::check_ramp_up({"linear", 5, 2}), vireo::Error);
  EXPECT_THROW(vireo::bench::check_ramp_up({"exponential", 0, 2}), vireo::Error);
}
