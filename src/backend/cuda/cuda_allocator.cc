#include "backend/cuda/cuda_allocator.h"

#include <cuda_runtime.h>

#include <string>

#include "core/error.h"

namespace vireo::cuda {

CudaAllocator::~CudaAllocator() {
  empty_cache();
  for (auto& [p, n] : live_) cudaFree(p);
}

// 512-byte granules below 1 MiB, 2 MiB granules above: bounded waste, few distinct sizes.
size_t CudaAllocator::round_size(size_t bytes) {
  if (bytes == 0) bytes = 1;
  const size_t g = bytes < (size_t{1} << 20) ? 512 : (size_t{2} << 20);
  return (bytes + g - 1) / g * g;
}

void* CudaAllocator::allocate(size_t bytes) {
  const size_t n = round_size(bytes);
  auto it = free_.find(n);
  void* p = nullptr;
  if (it != free_.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
    cached_bytes_ -= n;
  } else {
    cudaError_t e = cudaMalloc(&p, n);
    if (e != cudaSuccess && !capturing_) {  // give the cache back to the driver and try once more
      cudaGetLastError();
      empty_cache();
      e = cudaMalloc(&p, n);
    }
    if (e != cudaSuccess) {
      cudaGetLastError();
      throw Error("cuda alloc: cudaMalloc of " + std::to_string(n) + " bytes failed: " + cudaGetErrorString(e));
    }
  }
  live_[p] = n;
  live_bytes_ += n;
  return p;
}

void CudaAllocator::release(void* p) {
  auto it = live_.find(p);
  if (it == live_.end()) throw Error("cuda free: pointer was not allocated by this backend");
  free_[it->second].push_back(p);
  cached_bytes_ += it->second;
  live_bytes_ -= it->second;
  live_.erase(it);
}

void CudaAllocator::release_to_driver(void* p) {
  auto it = live_.find(p);
  if (it == live_.end()) throw Error("cuda free: pointer was not allocated by this backend");
  cudaDeviceSynchronize();  // queued kernels may still use it
  cudaFree(p);
  live_bytes_ -= it->second;
  live_.erase(it);
}

void CudaAllocator::empty_cache() {
  if (cached_bytes_ == 0) return;
  cudaDeviceSynchronize();  // blocks may still be in use by queued kernels
  for (auto& [n, v] : free_)
    for (void* p : v) cudaFree(p);
  free_.clear();
  cached_bytes_ = 0;
}

}  // namespace vireo::cuda
