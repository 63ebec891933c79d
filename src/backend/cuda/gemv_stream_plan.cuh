// What the streaming decode GEMVs (gemv_stream.cuh, gemv_stream_rows.cuh) share: how a launch cuts the
// rows over the grid's warps, the shared memory a block needs, the A/B switches, and the launch itself.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "backend/cuda/gemv_common.cuh"

namespace vireo::cuda {
namespace {

// How one launch cuts the work: rows split over all warps of the grid (rows_lo each, the first
// rows_extra warps one more), each warp's range copied in chunks of kCv 16-byte vectors.
struct StreamPlan {
  int stages;          // chunks in flight per warp
  int64_t rows_lo;     // rows per warp (floor)
  int64_t rows_extra;  // warps [0, rows_extra) take one more row
  bool group_copy = false;  // gemv_stream_rows.cuh: one bulk copy a group of rows
  int stats_cap = 0;        // gemv_stream_rows.cuh with row_stats: floats a warp parks its outputs in
};

// Shared memory of one block: x' [NR, K], then the warps' stages, then their barriers.
template <typename T, int NR, int kCv>
constexpr size_t stream_smem_bytes(int64_t k, int stages) {
  return static_cast<size_t>(NR) * k * sizeof(T) + size_t{kWarps} * stages * (kCv * 16 + 8);
}

// VIREO_GEMV_STREAM=0: never the streaming kernel (A/B); VIREO_GEMV_STREAM_PDL=0: launch it without PDL.
bool stream_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("VIREO_GEMV_STREAM");
    return e == nullptr || e[0] != '0';
  }();
  return on;
}

// VIREO_GEMV_STREAM_KB: cap on a block's shared memory (KiB; default: the device limit), for A/B runs.
// A block under half an SM's shared memory can share the SM with the next kernel's block, which then
// fills its ring while this one drains; on the H200 that measured no better (8B layer 115.5-117.0 us
// at 150 / 100 KiB, 116.1 at the full ring) or worse (110 / 80 KiB: 135-136 us).
size_t stream_cap_bytes() {
  static const size_t v = [] {
    const char* e = std::getenv("VIREO_GEMV_STREAM_KB");
    return e ? static_cast<size_t>(std::atoi(e)) << 10 : size_t{0};
  }();
  return v;
}

bool stream_pdl() {
  static const bool on = [] {
    const char* e = std::getenv("VIREO_GEMV_STREAM_PDL");
    return e == nullptr || e[0] != '0';
  }();
  return on;
}

// The dynamic shared memory a block of `kernel` may have: the per-block opt-in limit (227 KiB on sm_90)
// less the kernel's static shared memory (stage_input's reduction). Sets the kernel's attribute; callers
// keep the result in a static of their own instantiation, so it runs once per kernel.
size_t stream_max_smem(const void* kernel) {
  int dev = 0, optin = 0;
  VIREO_CUDA_CHECK(cudaGetDevice(&dev));
  VIREO_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  cudaFuncAttributes fa{};
  VIREO_CUDA_CHECK(cudaFuncGetAttributes(&fa, kernel));
  const size_t bytes = static_cast<size_t>(optin) - fa.sharedSizeBytes;
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
        "gemv_stream: cudaFuncSetAttribute");
  return bytes;
}

// Launches a streaming kernel over one block an SM with as many stages (a multiple of stage_multiple) as
// fit: ~24 KiB in flight a warp (~192 KiB an SM) where shared memory allows, 6 stages of 4 KiB, 12 of 2 KiB.
// False when not even two stages fit.
template <typename T, int NR, int kCv>
bool launch_stream_plan(void (*kernel)(GemvArgs, StreamPlan), size_t max_smem, int stage_multiple, const GemvArgs& a,
                        int num_sms, cudaStream_t stream, bool group_copy = false) {
  constexpr int kMaxStages = (24 << 10) / (kCv * 16);
  const size_t limit = stream_cap_bytes() > 0 ? std::min(stream_cap_bytes(), max_smem) : max_smem;
  const int64_t warps = int64_t{num_sms} * kWarps;
  const int64_t units = a.silu_out ? a.m / 2 : a.m;
  // row_stats: each warp's outputs, one float a row, after the barriers.
  const int64_t stats_cap = a.row_stats ? (units / warps + 4) / 4 * 4 : 0;
  const size_t stats_bytes = static_cast<size_t>(kWarps * stats_cap) * sizeof(float);
  int stages = kMaxStages / stage_multiple * stage_multiple;
  while (stages >= 2 && stream_smem_bytes<T, NR, kCv>(a.k, stages) + stats_bytes > limit) stages -= stage_multiple;
  if (stages < std::max(2, stage_multiple)) return false;
  const size_t smem = stream_smem_bytes<T, NR, kCv>(a.k, stages) + stats_bytes;
  StreamPlan p{stages, units / warps, units % warps, group_copy, static_cast<int>(stats_cap)};
  launch_maybe_pdl(stream_pdl(), kernel, dim3(static_cast<unsigned>(num_sms)), dim3(kThreads), smem, stream, a, p);
  return true;
}

}  // namespace
}  // namespace vireo::cuda
