#include "engine/step_profile.h"

#include <cstdlib>
#include <cstring>

#include "core/log.h"

namespace vireo {

StepProfile::StepProfile() {
  const char* v = std::getenv("VIREO_STEP_TIMING");
  enabled_ = v && std::strcmp(v, "0") != 0;
}

void StepProfile::begin() {
  if (enabled_) last_ = Clock::now();
}

void StepProfile::mark(Phase p) {
  if (!enabled_) return;
  const auto now = Clock::now();
  total_us_[p] += std::chrono::duration<double, std::micro>(now - last_).count();
  last_ = now;
}

void StepProfile::end(int rows) {
  if (!enabled_) return;
  ++steps_;
  rows_ += rows;
  if (steps_ < 256) return;
  const double n = static_cast<double>(steps_);
  log_info("step timing ({} steps, {:.1f} rows): schedule {:.0f} us, build {:.0f} us, forward+sample {:.0f} us, "
           "update {:.0f} us, outputs {:.0f} us",
           steps_, rows_ / n, total_us_[kSchedule] / n, total_us_[kBuild] / n, total_us_[kForward] / n,
           total_us_[kUpdate] / n, total_us_[kOutputs] / n);
  total_us_.fill(0);
  steps_ = rows_ = 0;
}

}  // namespace vireo
