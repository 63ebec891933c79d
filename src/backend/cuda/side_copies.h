// SideCopies: the small host<->device copies of decode steps on streams of their own, so that they
// overlap the compute stream's kernels instead of sitting between them (Backend::fence,
// copy_from_host_after, copy_to_host_async). On the compute stream each such copy costs ~5 us of GPU
// time however small it is; a decode step had three (the step's metadata, the sampling rows, the
// sampled tokens), ~20 us of a 0.6B step's ~850 (docs/cuda_kernels.md, "Copies between decode steps").
//
// Ordering: a fence is an event recorded on the compute stream. An upload waits for its fence on the
// upload stream, and the compute stream waits for the upload's completion, so every op issued after
// the upload sees the data. A download waits for a fresh fence on the download stream; its source must
// not be written again until the host has waited for it (HostStaging::wait).
#pragma once
#include <cuda_runtime.h>

#include <array>
#include <cstddef>

#include "backend/cuda/host_staging.h"

namespace vireo::cuda {

class SideCopies {
 public:
  explicit SideCopies(HostStaging& staging);
  ~SideCopies();
  SideCopies(const SideCopies&) = delete;
  SideCopies& operator=(const SideCopies&) = delete;

  // A point on `compute`: everything issued to it so far. Ids start at 1.
  int fence(cudaStream_t compute);
  // n <= HostStaging::kSlotBytes bytes to device dst once the ops before fence `after` are done (after
  // <= 0: once everything issued so far is); ops issued to `compute` afterwards wait for the copy.
  void upload_after(const void* src, void* dst, size_t n, int after, cudaStream_t compute);
  // Device src to host dst once everything issued to `compute` so far is done; dst is written by
  // staging.wait(ticket).
  int download(const void* src, void* dst, size_t n, cudaStream_t compute);
  void synchronize();

 private:
  // Fence events are a ring: an old id whose event was recorded again names a later point, which is
  // still a safe (later) point to wait for.
  static constexpr int kFences = 64;
  HostStaging& staging_;
  cudaStream_t up_ = nullptr, down_ = nullptr;
  std::array<cudaEvent_t, kFences> fences_{};
  int last_fence_ = 0;
};

}  // namespace vireo::cuda
