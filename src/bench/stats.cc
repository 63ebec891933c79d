#include "bench/stats.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace vireo::bench {

double mean(const std::vector<double>& xs) {
  if (xs.empty()) return 0.0;
  double s = 0.0;
  for (double x : xs) s += x;
  return s / static_cast<double>(xs.size());
}

double stddev(const std::vector<double>& xs) {
  if (xs.empty()) return 0.0;
  double m = mean(xs), s = 0.0;
  for (double x : xs) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(xs.size()));
}

double median(const std::vector<double>& xs) { return percentile(xs, 50.0); }

double percentile(std::vector<double> xs, double p) {
  if (p < 0.0 || p > 100.0) throw Error("percentile: p must be in [0, 100], got " + std::to_string(p));
  if (xs.empty()) return 0.0;
  std::sort(xs.begin(), xs.end());
  double rank = p / 100.0 * static_cast<double>(xs.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(rank));
  size_t hi = std::min(lo + 1, xs.size() - 1);
  double frac = rank - static_cast<double>(lo);
  return xs[lo] + (xs[hi] - xs[lo]) * frac;
}

}  // namespace vireo::bench
