// Reading CUDA events without waiting (the GPU timers: StepGpuTimer, OpGpuTimer).
#pragma once
#include <cuda_runtime.h>

namespace vireo::cuda {

// Microseconds from a to b (both completed), or -1 where the driver cannot say.
inline float event_elapsed_us(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  return cudaEventElapsedTime(&ms, a, b) == cudaSuccess ? ms * 1000.0f : -1.0f;
}

// Whether e has completed; never waits.
inline bool event_done(cudaEvent_t e) {
  const cudaError_t r = cudaEventQuery(e);
  if (r == cudaErrorNotReady) {
    cudaGetLastError();  // not sticky, but keep the last-error state clean
    return false;
  }
  return r == cudaSuccess;
}

}  // namespace vireo::cuda
