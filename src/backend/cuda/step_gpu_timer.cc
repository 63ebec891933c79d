#include "backend/cuda/step_gpu_timer.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/cuda_common.h"
#include "core/log.h"

namespace vireo::cuda {
namespace {

float elapsed_us(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  return cudaEventElapsedTime(&ms, a, b) == cudaSuccess ? ms * 1000.0f : -1.0f;
}

}  // namespace

StepGpuTimer::StepGpuTimer() {
  const char* v = std::getenv("VIREO_GPU_TIMING");
  enabled_ = v && std::strcmp(v, "0") != 0;
  if (!enabled_) return;
  for (Events& e : ev_)
    for (cudaEvent_t* p : {&e.graph_start, &e.graph_end, &e.sample_start, &e.sample_end})
      VIREO_CUDA_CHECK(cudaEventCreate(p));
}

StepGpuTimer::~StepGpuTimer() {
  for (Events& e : ev_)
    for (cudaEvent_t p : {e.graph_start, e.graph_end, e.sample_start, e.sample_end})
      if (p) cudaEventDestroy(p);
}

// `done` is the step before the one starting now (complete: its outputs were copied to the host);
// `before` the one before it, whose sampling end starts `done`'s gap.
void StepGpuTimer::collect(Events& done, const Events* before) {
  if (done.graph && done.sample) {
    graph_us_ += elapsed_us(done.graph_start, done.graph_end);
    sample_us_ += elapsed_us(done.sample_start, done.sample_end);
    ++steps_;
    if (before && before->sample) gaps_us_.push_back(elapsed_us(before->sample_end, done.graph_start));
  }
  if (steps_ >= 256) {
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
}

void StepGpuTimer::before_graph(cudaStream_t s) {
  if (!enabled_) return;
  Events& prev = ev_[cur_];
  Events& older = ev_[cur_ ^ 1];
  if (prev.graph || prev.sample) {
    VIREO_CUDA_CHECK(cudaEventSynchronize(prev.sample ? prev.sample_end : prev.graph_end));
    collect(prev, &older);
  }
  // `older` is reused for the new step; keep `prev` (its sample end starts the next gap).
  older.graph = older.sample = false;
  cur_ ^= 1;
  VIREO_CUDA_CHECK(cudaEventRecord(ev_[cur_].graph_start, s));
}

void StepGpuTimer::after_graph(cudaStream_t s) {
  if (!enabled_) return;
  VIREO_CUDA_CHECK(cudaEventRecord(ev_[cur_].graph_end, s));
  ev_[cur_].graph = true;
}

void StepGpuTimer::before_sample(cudaStream_t s) {
  if (!enabled_ || !ev_[cur_].graph || ev_[cur_].sample) return;
  VIREO_CUDA_CHECK(cudaEventRecord(ev_[cur_].sample_start, s));
}

void StepGpuTimer::after_sample(cudaStream_t s) {
  if (!enabled_ || !ev_[cur_].graph || ev_[cur_].sample) return;
  VIREO_CUDA_CHECK(cudaEventRecord(ev_[cur_].sample_end, s));
  ev_[cur_].sample = true;
}

}  // namespace vireo::cuda
