#include "backend/cuda/cuda_graph.h"

#include <algorithm>
#include <string>

#include "backend/cuda/cuda_common.h"

namespace vireo::cuda {

CudaGraphSet::~CudaGraphSet() {
  for (auto& [id, g] : graphs_) release(g);
  for (void* p : scratch_) alloc_.release(p);
}

void CudaGraphSet::release(Graph& g) {
  if (g.exec) cudaGraphExecDestroy(g.exec);
  g.exec = nullptr;
}

void CudaGraphSet::begin(cudaStream_t stream) {
  if (capturing_) throw Error("cuda graph: begin_capture while already capturing");
  VIREO_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
  capturing_ = true;
  alloc_.set_capturing(true);
}

int CudaGraphSet::end(cudaStream_t stream) {
  if (!capturing_) throw Error("cuda graph: end_capture without begin_capture");
  capturing_ = false;
  alloc_.set_capturing(false);
  cudaGraph_t graph = nullptr;
  Graph g;
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
  alloc_.set_capturing(false);
  cudaGraph_t graph = nullptr;
  cudaStreamEndCapture(stream, &graph);
  if (graph) cudaGraphDestroy(graph);
  cudaGetLastError();  // the capture is invalidated on error; clear the sticky-free error state
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
  if (bytes > scratch_bytes_ || scratch_.empty()) {
    const size_t n = std::max({bytes, 2 * scratch_bytes_, size_t{1} << 20});
    scratch_.push_back(alloc_.allocate(n));
    scratch_bytes_ = n;
  }
  return scratch_.back();
}

}  // namespace vireo::cuda
