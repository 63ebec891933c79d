// OpGpuTimer (VIREO_OP_TIMING=1): where an eager step's GPU time goes, op by op. An event is recorded on
// the stream after each op (and after parts of some, e.g. an FP8 linear's quantization), and the time
// between two consecutive events is charged to the later label. So every microsecond of the stream's
// timeline lands on some label: the label's kernels plus any idle gap before them (the first op of a step
// carries the time since the previous step's last op: host work, copies). Summed over the run, the table
// says how far each op is from its kernel time (ncu) and where a step's idle time sits.
// The events cost each kernel its programmatic-dependent-launch overlap with the one before, so a timed
// run is somewhat slower than an untimed one: compare their step times. Never waits on the GPU; logs the
// table every 50,000 marks and when destroyed. Off: no events at all.
#pragma once
#include <cuda_runtime.h>

#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace vireo::cuda {

class OpGpuTimer {
 public:
  OpGpuTimer();
  ~OpGpuTimer();
  OpGpuTimer(const OpGpuTimer&) = delete;
  OpGpuTimer& operator=(const OpGpuTimer&) = delete;

  bool enabled() const { return enabled_; }
  // The stream's work issued since the previous mark belongs to `label`.
  void mark(std::string_view label, cudaStream_t s);

 private:
  struct Mark {
    cudaEvent_t event;
    int label;
  };
  struct Total {
    std::string name;
    int64_t count = 0;
    double us = 0;
    double max_us = 0;  // the longest interval: an average carried by a few long gaps shows here
  };
  void collect_completed();
  void report();
  int label_id(std::string_view label);

  bool enabled_ = false;
  std::deque<Mark> pending_;  // recorded, not yet read; oldest first
  std::vector<cudaEvent_t> free_;
  cudaEvent_t last_ = nullptr;  // the last event read: the start of the next interval
  std::unordered_map<std::string, int> ids_;
  std::vector<Total> totals_;
  int64_t marks_since_report_ = 0;
};

}  // namespace vireo::cuda
