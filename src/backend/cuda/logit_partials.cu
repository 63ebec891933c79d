// LinearParams::out_partials in a pass of their own, for products the streaming GEMV does not take
// (cuBLASLt, f32 activations, batch-invariant mode): one warp a (row, run), each lane an online
// (max, sum) over every 32nd column of the run, merged across the warp.
#include <climits>
#include <cmath>

#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_types.cuh"
#include "backend/cuda/pdl.cuh"

namespace vireo::cuda {
namespace {

// (m, s, arg) <- merged with (m2, s2, arg2): the larger max, ties to the lower column.
__device__ __forceinline__ void merge_run(float& m, float& s, int& arg, float m2, float s2, int arg2) {
  if (m2 > m || (m2 == m && arg2 < arg)) {
    s = s2 + (m > -INFINITY ? s * expf(m - m2) : 0.f);
    m = m2, arg = arg2;
  } else if (m2 > -INFINITY) {
    s += s2 * expf(m2 - m);
  }
}

template <typename T>
__global__ void logit_partials_kernel(const T* __restrict__ out, float4* __restrict__ parts, int64_t rows, int64_t m,
                                      int64_t runs) {
  pdl_enter();
  const int lane = threadIdx.x & 31;
  const int64_t item = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (item >= rows * runs) return;  // whole warps
  const int64_t r = item / runs, j = item - r * runs, lo = m / runs, ex = m % runs;
  const int64_t b = j * lo + (j < ex ? j : ex), e = b + lo + (j < ex ? 1 : 0);
  float mx = -INFINITY, s = 0.f;
  int arg = INT_MAX;
  for (int64_t i = b + lane; i < e; i += 32) {
    const float y = to_f(out[r * m + i]);
    merge_run(mx, s, arg, y, y > -INFINITY ? 1.f : 0.f, static_cast<int>(i));
  }
  for (int o = 16; o > 0; o >>= 1)
    merge_run(mx, s, arg, __shfl_xor_sync(0xffffffffu, mx, o), __shfl_xor_sync(0xffffffffu, s, o),
              __shfl_xor_sync(0xffffffffu, arg, o));
  if (lane == 0) parts[item] = make_float4(mx, s, __int_as_float(arg == INT_MAX ? static_cast<int>(b) : arg), 0.f);
}

}  // namespace

void launch_logit_partials(const Tensor& out, const Tensor& partials, cudaStream_t stream) {
  const int64_t m = out.ndim() >= 1 ? out.dim(-1) : 0, n = m > 0 ? out.numel() / m : 0;
  if (partials.dtype != DType::kF32 || partials.ndim() != 3 || partials.dim(2) != 4 || partials.dim(0) < n ||
      partials.dim(1) < 1 || partials.dim(1) > m)
    throw Error("linear: out_partials " + partials.shape_str() + " must be F32 [N, P, 4], P <= M, for out " +
                out.shape_str());
  if (n == 0) return;
  const int64_t runs = partials.dim(1), warps = n * runs;
  dispatch_float(out.dtype, "linear: out", [&](auto t) {
    using T = decltype(t);
    launch_pdl(logit_partials_kernel<T>, dim3(static_cast<unsigned>((warps + 7) / 8)), dim3(256), 0, stream,
               static_cast<const T*>(out.data), static_cast<float4*>(partials.data), n, m, runs);
  });
  check_launch("logit_partials_kernel");
}

}  // namespace vireo::cuda
