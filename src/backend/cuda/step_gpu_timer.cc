#include "backend/cuda/step_gpu_timer.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/cuda_common.h"
#include "backend/cuda/event_util.h"
#include "core/log.h"

namespace vireo::cuda {

StepGpuTimer::StepGpuTimer() {
  const char* v = std::getenv("VIREO_GPU_TIMING");
  enabled_ = v && std::strcmp(v, "0") != 0;
}

void StepGpuTimer::report() {
  if (steps_ == 0) return;
  float gap = 0;
  if (!gaps_us_.empty()) {
    std::nth_element(gaps_us_.begin(), gaps_us_.begin() + gaps_us_.size() / 2, gaps_us_.end());
    gap = gaps_us_[gaps_us_.size() / 2];
  }
  log_info("gpu step timing ({} graph steps): graph {:.1f} us, sampling {:.1f} us, idle before the graph "
           "(median) {:.1f} us",
           steps_, graph_us_ / steps_, sample_us_ / steps_, gap);
  steps_ = 0;
  graph_us_ = sample_us_ = 0;
  gaps_us_.clear();
}

StepGpuTimer::~StepGpuTimer() {
  if (enabled_) {  // the steps since the last report (a run shorter than 256 graph steps has had none)
    for (Events& e : recorded_)
      if (e.sample) cudaEventSynchronize(e.sample_end);
    collect_completed();
    report();
  }
  auto destroy = [](Events& e) {
    for (cudaEvent_t p : {e.graph_start, e.graph_end, e.sample_start, e.sample_end})
      if (p) cudaEventDestroy(p);
  };
  for (Events& e : recorded_) destroy(e);
  for (Events& e : free_) destroy(e);
  if (have_last_) destroy(last_);
}

StepGpuTimer::Events StepGpuTimer::take_free() {
  if (!free_.empty()) {
    Events e = free_.back();
    free_.pop_back();
    e.sample = false;
    return e;
  }
  Events e;
  for (cudaEvent_t* p : {&e.graph_start, &e.graph_end, &e.sample_start, &e.sample_end})
    VIREO_CUDA_CHECK(cudaEventCreate(p));
  return e;
}

void StepGpuTimer::collect_completed() {
  // A step is read once its sampling ended, or, when no sampling followed it (a graph that samples inside,
  // or logits to the host), once a later step was recorded and its graph ended: its sampling counts 0.
  while (!recorded_.empty()) {
    Events& e = recorded_.front();
    if (!e.sample && recorded_.size() == 1) return;  // still being issued
    if (!event_done(e.sample ? e.sample_end : e.graph_end)) return;
    graph_us_ += event_elapsed_us(e.graph_start, e.graph_end);
    if (e.sample) sample_us_ += event_elapsed_us(e.sample_start, e.sample_end);
    ++steps_;
    if (have_last_) {
      gaps_us_.push_back(event_elapsed_us(last_.sample ? last_.sample_end : last_.graph_end, e.graph_start));
      free_.push_back(last_);
    }
    last_ = e;
    have_last_ = true;
    recorded_.pop_front();
  }
}

void StepGpuTimer::before_graph(cudaStream_t s) {
  if (!enabled_) return;
  collect_completed();
  if (steps_ >= 256) report();
  recorded_.push_back(take_free());
  VIREO_CUDA_CHECK(cudaEventRecord(recorded_.back().graph_start, s));
}

void StepGpuTimer::after_graph(cudaStream_t s) {
  if (!enabled_ || recorded_.empty()) return;
  VIREO_CUDA_CHECK(cudaEventRecord(recorded_.back().graph_end, s));
}

void StepGpuTimer::before_sample(cudaStream_t s) {
  if (!enabled_ || recorded_.empty() || recorded_.back().sample) return;
  VIREO_CUDA_CHECK(cudaEventRecord(recorded_.back().sample_start, s));
}

void StepGpuTimer::after_sample(cudaStream_t s) {
  if (!enabled_ || recorded_.empty() || recorded_.back().sample) return;
  VIREO_CUDA_CHECK(cudaEventRecord(recorded_.back().sample_end, s));
  recorded_.back().sample = true;
}

}  // namespace vireo::cuda
