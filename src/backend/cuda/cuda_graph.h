// CUDA graphs of the backend's stream: capture, instantiate, replay, and the scratch each graph owns.
#pragma once
#include <cuda_runtime.h>

#include <map>
#include <vector>

#include "backend/cuda/cuda_allocator.h"

namespace vireo::cuda {

class CudaGraphSet {
 public:
  explicit CudaGraphSet(CudaAllocator& alloc) : alloc_(alloc) {}
  ~CudaGraphSet();
  CudaGraphSet(const CudaGraphSet&) = delete;
  CudaGraphSet& operator=(const CudaGraphSet&) = delete;

  bool capturing() const { return capturing_; }
  // Relaxed mode: the allocator may cudaMalloc graph scratch mid-capture (it enqueues nothing).
  void begin(cudaStream_t stream);
  int end(cudaStream_t stream);
  void abort(cudaStream_t stream);
  void replay(int id, cudaStream_t stream);
  void destroy(int id);
  // Scratch for an op being captured: lives as long as the graph (eager scratch may be reallocated).
  void* scratch(size_t bytes);

 private:
  struct Graph {
    cudaGraphExec_t exec = nullptr;
    std::vector<void*> scratch;
  };
  void release(Graph& g);

  CudaAllocator& alloc_;
  bool capturing_ = false;
  std::vector<void*> pending_scratch_;
  std::map<int, Graph> graphs_;
  int next_id_ = 1;
};

}  // namespace vireo::cuda
