// Grouped MoE, step 4 (moe.h): each token's k expert outputs summed in ascending expert id.
// y [S, hidden] holds round(act . down_e[j]) per sorted row (moe_grouped_gemm.cu; with down_b already
// round(that + b_down[e, j]), as the per-slot kernel's y); the token's slot rows come from row_of_slot.
// The sum is the per-slot down kernel's (moe_decode.cu) step for step:
//   acc = 0; for each slot in ascending expert id: acc = round(acc + round(y * weight))
// (HF's index_add_ order and bf16 rounding), so both paths round identically after the dot products.
// One block per (token, 1024 columns); a thread owns 8 adjacent columns (one 16-byte vector per row).
#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_types.cuh"
#include "backend/cuda/moe.h"
#include "backend/cuda/pdl.cuh"

namespace vireo::cuda {
namespace {

constexpr int kCombineThreads = 128, kColsPerThread = 8;
constexpr int kMaxTopK = 32;  // launch_moe's limit

// grid: (T, ceil(hidden / 1024)); hidden % 8 == 0 and y, out 16-byte aligned.
template <typename T>
__global__ void __launch_bounds__(kCombineThreads) moe_combine_kernel(const T* y, const int* ids, const float* weights,
                                                                      const int* row_of_slot, int top_k, int64_t hidden,
                                                                      T* out) {
  __shared__ int rows[kMaxTopK];
  __shared__ float wts[kMaxTopK];
  const int64_t t = blockIdx.x;
  pdl_enter();  // y, ids, weights and rows come from earlier kernels
  if (threadIdx.x < top_k) {
    // A token's k ids are distinct: slot q's place in ascending id order is the count of smaller ids.
    const int64_t s = t * top_k + threadIdx.x;
    const int id = ids[s];
    int rank = 0;
    for (int q = 0; q < top_k; ++q) rank += ids[t * top_k + q] < id;
    rows[rank] = row_of_slot[s];
    wts[rank] = weights[s];
  }
  __syncthreads();
  const int64_t j = (static_cast<int64_t>(blockIdx.y) * kCombineThreads + threadIdx.x) * kColsPerThread;
  if (j >= hidden) return;
  static_assert(Vec<T>::kN == kColsPerThread, "one 16-byte vector per row");
  float acc[kColsPerThread] = {};
  for (int n = 0; n < top_k; ++n) {
    Vec<T> v;
    v.raw = *reinterpret_cast<const uint4*>(y + static_cast<int64_t>(rows[n]) * hidden + j);
    const float w = wts[n];
#pragma unroll
    for (int c = 0; c < kColsPerThread; ++c) acc[c] = to_f(from_f<T>(acc[c] + to_f(from_f<T>(to_f(v.v[c]) * w))));
  }
  Vec<T> o;
#pragma unroll
  for (int c = 0; c < kColsPerThread; ++c) o.v[c] = from_f<T>(acc[c]);
  *reinterpret_cast<uint4*>(out + t * hidden + j) = o.raw;
}

}  // namespace

void launch_moe_combine(DType dt, const void* y, const int* ids, const float* weights, const int* row_of_slot,
                        int64_t tokens, int top_k, int64_t hidden, void* out, cudaStream_t stream) {
  if (top_k < 1 || top_k > kMaxTopK || hidden % kColsPerThread != 0) throw Error("cuda moe combine: bad shape");
  const int64_t per_block = int64_t{kCombineThreads} * kColsPerThread;
  const dim3 grid(static_cast<unsigned>(tokens), static_cast<unsigned>((hidden + per_block - 1) / per_block));
  dispatch_float(dt, "moe combine", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float>) {
      throw Error("cuda moe combine: bf16 / f16 only");
    } else {
      launch_pdl(moe_combine_kernel<T>, grid, dim3(kCombineThreads), 0, stream, static_cast<const T*>(y), ids, weights,
                 row_of_slot, top_k, hidden, static_cast<T*>(out));
    }
  });
  check_launch("moe combine");
}

}  // namespace vireo::cuda
