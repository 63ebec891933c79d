// StepGpuTimer (VIREO_GPU_TIMING=1): GPU-side time of each decode step's parts, from CUDA events, to
// see where a step's wall time goes that host timers cannot: the graph replay (the forward), the
// sampling kernels, and the idle gap between the previous step's last kernel and this step's graph
// (host work, copies and launch latency). Logs means (the gap: its median) every 256 graph steps. Off: no events at all.
#pragma once
#include <cuda_runtime.h>

#include <vector>

namespace vireo::cuda {

class StepGpuTimer {
 public:
  StepGpuTimer();
  ~StepGpuTimer();
  StepGpuTimer(const StepGpuTimer&) = delete;
  StepGpuTimer& operator=(const StepGpuTimer&) = delete;

  void before_graph(cudaStream_t s);
  void after_graph(cudaStream_t s);
  void before_sample(cudaStream_t s);
  void after_sample(cudaStream_t s);

 private:
  // One step's events; two sets alternate so the previous step's are complete when read.
  struct Events {
    cudaEvent_t graph_start = nullptr, graph_end = nullptr, sample_start = nullptr, sample_end = nullptr;
    bool graph = false, sample = false;
  };
  void collect(Events& done, const Events* before);

  bool enabled_ = false;
  Events ev_[2];
  int cur_ = 0;
  int steps_ = 0;
  double graph_us_ = 0, sample_us_ = 0;
  std::vector<float> gaps_us_;  // median reported: the first decode step's gap spans the prefill
};

}  // namespace vireo::cuda
