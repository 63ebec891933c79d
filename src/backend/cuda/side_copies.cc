#include "backend/cuda/side_copies.h"

#include "backend/cuda/cuda_common.h"

namespace vireo::cuda {

SideCopies::SideCopies(HostStaging& staging) : staging_(staging) {
  VIREO_CUDA_CHECK(cudaStreamCreateWithFlags(&up_, cudaStreamNonBlocking));
  VIREO_CUDA_CHECK(cudaStreamCreateWithFlags(&down_, cudaStreamNonBlocking));
  for (cudaEvent_t& e : fences_) VIREO_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
}

SideCopies::~SideCopies() {
  for (cudaStream_t s : {up_, down_})
    if (s) cudaStreamSynchronize(s), cudaStreamDestroy(s);
  for (cudaEvent_t e : fences_)
    if (e) cudaEventDestroy(e);
}

int SideCopies::fence(cudaStream_t compute) {
  const int id = ++last_fence_;
  VIREO_CUDA_CHECK(cudaEventRecord(fences_[id % kFences], compute));
  return id;
}

void SideCopies::upload_after(const void* src, void* dst, size_t n, int after, cudaStream_t compute) {
  if (after <= 0 || after > last_fence_) after = fence(compute);
  VIREO_CUDA_CHECK(cudaStreamWaitEvent(up_, fences_[after % kFences], 0));
  const cudaEvent_t done = staging_.upload(src, dst, n, up_);
  VIREO_CUDA_CHECK(cudaStreamWaitEvent(compute, done, 0));
}

int SideCopies::download(const void* src, void* dst, size_t n, cudaStream_t compute) {
  VIREO_CUDA_CHECK(cudaStreamWaitEvent(down_, fences_[fence(compute) % kFences], 0));
  return staging_.download(src, dst, n, down_);
}

void SideCopies::synchronize() {
  VIREO_CUDA_CHECK(cudaStreamSynchronize(up_));
  VIREO_CUDA_CHECK(cudaStreamSynchronize(down_));
}

}  // namespace vireo::cuda
