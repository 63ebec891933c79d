#include "backend/cuda/cuda_graph.h"

#include <string>

#include "backend/cuda/cuda_common.h"

namespace vireo::cuda {

CudaGraphSet::~CudaGraphSet() {
  for (auto& [id, g] : graphs_) release(g);
  for (void* p : pending_scratch_) alloc_.release(p);
}

void CudaGraphSet::release(Graph& g) {
  if (g.exec) cudaGraphExecDestroy(g.exec);
  g.exec = nullptr;
  for (void* p : g.scratch) alloc_.release(p);
  g.scratch.clear();
}

void CudaGraphSet::begin(cudaStream_t stream) {
  if (capturing_) throw Error("cuda graph: begin_capture while already capturing");
  VIREO_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
  capturing_ = true;
}

int CudaGraphSet::end(cudaStream_t stream) {
  if (!capturing_) throw Error("cuda graph: end_capture without begin_capture");
  capturing_ = false;
  cudaGraph_t graph = nullptr;
  Graph g;
  g.scratch.swap(pending_scratch_);
  cudaError_t e = cudaStreamEndCapture(stream, &graph);
  if (e == cudaSuccess) e = cudaGraphInstantiate(&g.exec, graph, 0);
  if (graph) cudaGraphDestroy(graph);  // the executable graph keeps what it needs
  if (e != cudaSuccess) {
    cudaGetLastError();
    release(g);
    throw Error(std::string("cuda graph: capture failed: ") + cudaGetErrorString(e));
  }
  const int id = next_id_++;
  graphs_[id] = std::move(g);
  return id;
}

void CudaGraphSet::abort(cudaStream_t stream) {
  if (!capturing_) return;
  capturing_ = false;
  cudaGraph_t graph = nullptr;
  cudaStreamEndCapture(stream, &graph);
  if (graph) cudaGraphDestroy(graph);
  cudaGetLastError();  // the capture is invalidated on error; clear the sticky-free error state
  for (void* p : pending_scratch_) alloc_.release(p);
  pending_scratch_.clear();
}

void CudaGraphSet::replay(int id, cudaStream_t stream) {
  auto it = graphs_.find(id);
  if (it == graphs_.end()) throw Error("cuda graph: no graph " + std::to_string(id));
  VIREO_CUDA_CHECK(cudaGraphLaunch(it->second.exec, stream));
}

void CudaGraphSet::destroy(int id) {
  auto it = graphs_.find(id);
  if (it == graphs_.end()) return;
  release(it->second);
  graphs_.erase(it);
}

void* CudaGraphSet::scratch(size_t bytes) {
  void* p = alloc_.allocate(bytes);
  pending_scratch_.push_back(p);
  return p;
}

}  // namespace vireo::cuda
