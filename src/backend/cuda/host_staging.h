// HostStaging: pinned host buffers for the backend's small copies, in rings so a copy never waits for
// unrelated GPU work. Uploads (step metadata, sampling rows) take the next of kSlots slots and only wait
// if that slot's previous copy (kSlots uploads ago) has not run yet; downloads (sampled tokens) land in a
// slot and reach the caller's buffer at wait(ticket). With async scheduling the next step's uploads are
// issued while the current step still runs, so a single buffer would serialise them behind it.
#pragma once
#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <deque>

namespace vireo::cuda {

class HostStaging {
 public:
  static constexpr int kSlots = 4;
  static constexpr size_t kSlotBytes = size_t{4} << 20;

  HostStaging();
  ~HostStaging();
  HostStaging(const HostStaging&) = delete;
  HostStaging& operator=(const HostStaging&) = delete;

  // Copies n <= kSlotBytes bytes from src to device dst on `stream`; returns once src may be reused,
  // with the event that completes with the copy (valid until kSlots more uploads).
  cudaEvent_t upload(const void* src, void* dst, size_t n, cudaStream_t stream);
  // Enqueues a copy of n <= kSlotBytes device bytes; dst is written by wait(ticket).
  int download(const void* src, void* dst, size_t n, cudaStream_t stream);
  // Completes every download up to `ticket` (in order).
  void wait(int ticket);

 private:
  struct Ring {
    std::array<void*, kSlots> buf{};
    std::array<cudaEvent_t, kSlots> done{};
    int next = 0;
  };
  struct Pending {
    int ticket, slot;
    void* dst;
    size_t n;
  };
  void complete_front();

  Ring up_, down_;
  std::deque<Pending> pending_;
  int next_ticket_ = 1;
};

}  // namespace vireo::cuda
