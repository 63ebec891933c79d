// CUDA graphs of the backend's stream: capture, instantiate, replay, and the scratch they share.
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
  // Scratch for an op being captured, shared by every op of every graph of the set: graphs replay one
  // at a time on one stream and a graph's ops run in stream order (with PDL a kernel waits for its
  // predecessor before touching memory), so one buffer serves them all, as the eager workspace does.
  // A request past the current buffer gets a new one (at least twice as large); the smaller ones stay
  // alive for the graphs captured with them, until the set is destroyed. (A buffer per op, as before,
  // held every layer's attention partials for every captured size: Qwen3-8B at --max-num-seqs 256
  // ran out of memory capturing its decode graphs beside a 0.9-utilisation KV cache.)
  void* scratch(size_t bytes);

 private:
  struct Graph {
    cudaGraphExec_t exec = nullptr;
  };
  void release(Graph& g);

  CudaAllocator& alloc_;
  bool capturing_ = false;
  std::vector<void*> scratch_;  // every shared buffer made so far; the last is the current one
  size_t scratch_bytes_ = 0;    // the current one's size
  std::map<int, Graph> graphs_;
  int next_id_ = 1;
};

}  // namespace vireo::cuda
