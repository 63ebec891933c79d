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

void check_ramp_up(const RampUp& ramp) {
  if (ramp.strategy != "linear" && ramp.strategy != "exponential")
    throw Error("--ramp-up-strategy must be linear or exponential, got '" + ramp.strategy + "'");
  if (!(ramp.start_rps >= 0) || !(ramp.end_rps > 0) || ramp.start_rps > ramp.end_rps)
    throw Error("--ramp-up-start-rps / --ramp-up-end-rps: need 0 <= start <= end and end > 0");
  if (ramp.strategy == "exponential" && ramp.start_rps <= 0)
    throw Error("--ramp-up-strategy exponential needs --ramp-up-start-rps > 0");
}

std::vector<double> arrival_offsets(int n, const RampUp& ramp, double burstiness, uint64_t seed) {
  check_ramp_up(ramp);
  if (!(burstiness > 0.0)) throw Error("--burstiness must be > 0, got " + std::to_string(burstiness));
  std::mt19937_64 rng(seed);
  std::gamma_distribution<double> unit(burstiness, 1.0);  // scaled per request: mean 1 / rate
  std::vector<double> out;
  out.reserve(n > 0 ? n : 0);
  double t = 0.0;
  for (int i = 0; i < n; ++i) {
    out.push_back(t);
    const double progress = n > 1 ? static_cast<double>(i) / (n - 1) : 1.0;
    const double rate = ramp.strategy == "linear"
                            ? ramp.start_rps + (ramp.end_rps - ramp.start_rps) * progress
                            : ramp.start_rps * std::pow(ramp.end_rps / ramp.start_rps, progress);
    t += rate > 0 ? unit(rng) / (rate * burstiness) : 0.0;  // rate 0 (a linear ramp's start): no wait
  }
  return out;
}

}  // namespace vireo::bench
