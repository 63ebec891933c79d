// LinearParams::row_stats for the linears whose kernel does not write them (every shape but the batch-1
// streaming lm_head, gemv_stream_rows.cuh): a pass over the output rows, one warp a range, lanes over
// consecutive ids. Reads N x M values twice (from L2 right after the linear); the oracle is
// cpu::range_stats.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_types.cuh"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/range_stats.cuh"

namespace vireo::cuda {
namespace {

constexpr int kStatsWarps = 8;

struct RowStatsArgs {
  const void* out;  // [N, M]
  float4* stats;    // [N, C]
  int64_t n, m, num_ranges;
};

template <typename T>
__global__ void __launch_bounds__(kStatsWarps * 32) row_stats_kernel(RowStatsArgs a) {
  pdl_enter();  // the linear's output is complete
  const int64_t unit = static_cast<int64_t>(blockIdx.x) * kStatsWarps + threadIdx.x / 32;  // (row, range)
  if (unit >= a.n * a.num_ranges) return;
  const int lane = threadIdx.x % 32;
  const int64_t r = unit / a.num_ranges, c = unit % a.num_ranges;
  const int64_t lo = a.m / a.num_ranges, extra = a.m % a.num_ranges;
  const int64_t b = c * lo + (c < extra ? c : extra), e = b + lo + (c < extra ? 1 : 0);
  const T* row = static_cast<const T*>(a.out) + r * a.m + b;
  const float4 st = warp_range_stats(static_cast<int>(e - b), b, [&](int i) { return to_f(row[i]); });
  if (lane == 0) a.stats[unit] = st;
}

}  // namespace

void launch_row_stats(const LinearParams& p, cudaStream_t stream) {
  const Tensor& s = p.row_stats;
  const int64_t m = p.out.dim(-1), n = m > 0 ? p.out.numel() / m : 0;
  if (s.dtype != DType::kF32 || s.ndim() != 3 || s.dim(0) != n || s.dim(1) < 1 || s.dim(2) != 4)
    throw Error("linear: row_stats must be F32 [N, C, 4], got " + s.shape_str());
  if (n == 0) return;
  RowStatsArgs a{p.out.data, static_cast<float4*>(s.data), n, m, s.dim(1)};
  const int64_t blocks = (n * a.num_ranges + kStatsWarps - 1) / kStatsWarps;
  dispatch_float(p.out.dtype, "linear: row_stats output", [&](auto t) {
    using T = decltype(t);
    launch_pdl(row_stats_kernel<T>, dim3(static_cast<unsigned>(blocks)), dim3(kStatsWarps * 32), 0, stream, a);
  });
  check_launch("row_stats_kernel");
}

}  // namespace vireo::cuda
