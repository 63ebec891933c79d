// A stream whose kernels run on a fixed subset of the GPU's SMs (a CUDA green context, driver 12.4+), so a
// bandwidth-bound op (a serving step's decode rows' attention) can run beside compute-bound ones (the prompt
// rows' GEMMs) without its blocks taking every SM first: the block scheduler places a high-priority grid on
// any free SM, and a GEMM block needs a whole SM's shared memory, so on one device-wide stream the two ran
// mostly in turn. The driver's functions are found through the runtime (nothing links libcuda).
#pragma once
#include <cuda_runtime.h>

#include <memory>

namespace vireo::cuda {

class SmPartition {
 public:
  // A partition of at least min_sms SMs of `device` (the driver rounds up: 8 a group on sm_90) with a stream
  // at `priority` and an event of the partition's own context; null where the driver has no green
  // contexts or the split fails (the caller keeps its device-wide streams).
  static std::unique_ptr<SmPartition> create(int device, int min_sms, int priority);
  ~SmPartition();
  SmPartition(const SmPartition&) = delete;
  SmPartition& operator=(const SmPartition&) = delete;

  cudaStream_t stream() const { return stream_; }
  // Recorded on stream() (an event of the same context); other streams may wait on it.
  cudaEvent_t done() const { return done_; }
  int num_sms() const { return num_sms_; }

 private:
  SmPartition() = default;
  void* green_ = nullptr;  // CUgreenCtx
  cudaStream_t stream_ = nullptr;
  cudaEvent_t done_ = nullptr;
  int num_sms_ = 0;
};

}  // namespace vireo::cuda
