#include "backend/cuda/host_staging.h"

#include <cstring>

#include "backend/cuda/cuda_common.h"

namespace vireo::cuda {

HostStaging::HostStaging() {
  for (Ring* r : {&up_, &down_})
    for (int i = 0; i < kSlots; ++i) {
      VIREO_CUDA_CHECK(cudaMallocHost(&r->buf[i], kSlotBytes));
      VIREO_CUDA_CHECK(cudaEventCreateWithFlags(&r->done[i], cudaEventDisableTiming));
    }
}

HostStaging::~HostStaging() {
  for (Ring* r : {&up_, &down_})
    for (int i = 0; i < kSlots; ++i) {
      if (r->done[i]) cudaEventSynchronize(r->done[i]), cudaEventDestroy(r->done[i]);
      if (r->buf[i]) cudaFreeHost(r->buf[i]);
    }
}

cudaEvent_t HostStaging::upload(const void* src, void* dst, size_t n, cudaStream_t stream) {
  const int s = up_.next;
  up_.next = (s + 1) % kSlots;
  VIREO_CUDA_CHECK(cudaEventSynchronize(up_.done[s]));  // its copy of kSlots uploads ago has run
  std::memcpy(up_.buf[s], src, n);
  VIREO_CUDA_CHECK(cudaMemcpyAsync(dst, up_.buf[s], n, cudaMemcpyHostToDevice, stream));
  VIREO_CUDA_CHECK(cudaEventRecord(up_.done[s], stream));
  return up_.done[s];
}

int HostStaging::download(const void* src, void* dst, size_t n, cudaStream_t stream) {
  const int s = down_.next;
  down_.next = (s + 1) % kSlots;
  // Pending downloads hold the last slots in order, so slot s is taken only when all kSlots are:
  // hand the oldest over first.
  while (pending_.size() >= static_cast<size_t>(kSlots)) complete_front();
  VIREO_CUDA_CHECK(cudaMemcpyAsync(down_.buf[s], src, n, cudaMemcpyDeviceToHost, stream));
  VIREO_CUDA_CHECK(cudaEventRecord(down_.done[s], stream));
  const int t = next_ticket_++;
  pending_.push_back({t, s, dst, n});
  return t;
}

void HostStaging::complete_front() {
  const Pending p = pending_.front();
  pending_.pop_front();
  VIREO_CUDA_CHECK(cudaEventSynchronize(down_.done[p.slot]));
  std::memcpy(p.dst, down_.buf[p.slot], p.n);
}

void HostStaging::wait(int ticket) {
  while (!pending_.empty() && pending_.front().ticket <= ticket) complete_front();
}

}  // namespace vireo::cuda
