// StepGpuTimer (VIREO_GPU_TIMING=1): GPU-side time of each decode step's parts, from CUDA events, to
// see where a step's wall time goes that host timers cannot: the graph replay (the forward), the
// sampling kernels, and the idle gap between the previous step's last kernel and this step's graph
// (host work, copies and launch latency). Logs means (the gap: its median) every 256 graph steps and at exit.
// Never waits: a step's events are read once they have completed (async scheduling keeps a step in
// flight while the next is issued). Off: no events at all.
#pragma once
#include <cuda_runtime.h>

#include <deque>
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
  struct Events {  // one graph step
    cudaEvent_t graph_start = nullptr, graph_end = nullptr, sample_start = nullptr, sample_end = nullptr;
    bool sample = false;
  };
  void collect_completed();
  void report();  // logs the means since the last report
  Events take_free();

  bool enabled_ = false;
  std::deque<Events> recorded_;  // oldest first; the back is the step being issued
  std::vector<Events> free_;
  Events last_;  // the last collected step (its sample end starts the next gap)
  bool have_last_ = false;
  int steps_ = 0;
  double graph_us_ = 0, sample_us_ = 0;
  std::vector<float> gaps_us_;  // median reported: the first decode step's gap spans the prefill
};

}  // namespace vireo::cuda
