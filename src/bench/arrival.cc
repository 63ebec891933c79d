#include "bench/arrival.h"

#include <cmath>
#include <string>

#include "core/error.h"

namespace vireo::bench {

ArrivalProcess::ArrivalProcess(double rate, double burstiness, uint64_t seed)
    : instant_(std::isinf(rate)), rng_(seed) {
  if (!(rate > 0.0)) throw Error("--request-rate must be > 0 (or inf), got " + std::to_string(rate));
  if (!(burstiness > 0.0)) throw Error("--burstiness must be > 0, got " + std::to_string(burstiness));
  if (!instant_) {
    // mean = shape * scale = 1/rate.
    gamma_ = std::gamma_distribution<double>(burstiness, 1.0 / (rate * burstiness));
  }
}

double ArrivalProcess::next_gap_s() { return instant_ ? 0.0 : gamma_(rng_); }

std::vector<double> arrival_offsets(int n, double rate, double burstiness, uint64_t seed) {
  ArrivalProcess proc(rate, burstiness, seed);
  std::vector<double> out;
  out.reserve(n > 0 ? n : 0);
  double t = 0.0;
  for (int i = 0; i < n; ++i) {
    out.push_back(t);
    t += proc.next_gap_s();
  }
  return out;
}

}  // namespace vireo::bench
