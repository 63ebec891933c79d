// Host-side time per engine-step phase, for finding where a step's time goes. On when the
// environment sets VIREO_STEP_TIMING=1: every 256 steps the means are logged, e.g.
//   step timing (256 steps, 8.3 rows): schedule 12 us, build 9 us, forward+sample 3402 us, ...
#pragma once
#include <array>
#include <chrono>
#include <cstdint>

namespace vireo {

class StepProfile {
 public:
  enum Phase { kSchedule, kBuild, kForward, kUpdate, kOutputs, kNumPhases };

  StepProfile();
  bool enabled() const { return enabled_; }
  // Starts a step; each mark() closes the phase that ran since the previous mark.
  void begin();
  void mark(Phase p);
  // Ends a step of `rows` sampled rows; logs and resets every 256 steps.
  void end(int rows);

 private:
  using Clock = std::chrono::steady_clock;
  bool enabled_ = false;
  Clock::time_point last_;
  std::array<double, kNumPhases> total_us_{};
  int64_t steps_ = 0, rows_ = 0;
};

}  // namespace vireo
