// Request arrival times for `bench serve`, as vLLM's get_request(): with an infinite rate every
// request is sent at t=0; otherwise the gaps are gamma-distributed with shape = burstiness and
// mean 1/rate (burstiness 1 = exponential gaps = a Poisson process; < 1 burstier, > 1 more even).
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace vireo::bench {

class ArrivalProcess {
 public:
  // rate: requests/s (> 0, may be +inf); burstiness > 0. Throws vireo::Error otherwise.
  ArrivalProcess(double rate, double burstiness, uint64_t seed);
  double next_gap_s();  // seconds until the next request
  bool is_instant() const { return instant_; }

 private:
  bool instant_;
  std::mt19937_64 rng_;
  std::gamma_distribution<double> gamma_;
};

// Send offsets (seconds from the start) of n requests; the first is at 0, as vLLM's generator
// yields before it sleeps, so request i starts after gaps 0..i-1.
std::vector<double> arrival_offsets(int n, double rate, double burstiness, uint64_t seed);

// vLLM's --ramp-up-strategy: the rate of request i moves from start_rps to end_rps with its progress
// i / (n - 1), linearly or geometrically ("exponential"); each gap is drawn as above at that rate.
struct RampUp {
  std::string strategy;  // "" (none), "linear" or "exponential"
  double start_rps = 0, end_rps = 0;
};
// Throws vireo::Error for an unknown strategy or rates vLLM refuses (start > end, negative, exponential from 0).
void check_ramp_up(const RampUp& ramp);
std::vector<double> arrival_offsets(int n, const RampUp& ramp, double burstiness, uint64_t seed);

}  // namespace vireo::bench
