// mla_pack (MlaPackParams): DeepSeek MLA's q / kv_b_proj / k_pe rows copied into the qkv layout
// qkv_prepare takes (k_pe broadcast to every head, v zero-padded to the head dim). One thread per
// output element; a pure copy, so every dtype and batch shape gives the same bits. Graph-capturable.
#include <algorithm>
#include <string>

#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_types.cuh"
#include "backend/cuda/pdl.cuh"

namespace vireo::cuda {
namespace {

template <typename T>
__global__ void mla_pack_kernel(const T* __restrict__ q, const T* __restrict__ kv, const T* __restrict__ kpe,
                                T* __restrict__ qkv, int64_t T_, int H, int R, int N, int V) {
  pdl_enter();
  const int D = R + N;
  const int64_t row = 3LL * H * D, n = T_ * row;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = i / row;
    const int c = static_cast<int>(i % row);
    const int part = c / (H * D), h = (c % (H * D)) / D, d = c % D;
    const T* src = kv + (t * H + h) * (N + V);
    T v;
    if (part == 0) v = q[t * H * D + c];
    else if (part == 1) v = d < R ? kpe[t * R + d] : src[d - R];
    else v = d < V ? src[N + d] : from_f<T>(0.f);
    qkv[i] = v;
  }
}

}  // namespace

void launch_mla_pack(const MlaPackParams& p, cudaStream_t stream) {
  const int64_t H = p.num_heads, R = p.rope_dim, N = p.nope_dim, V = p.v_dim, D = R + N;
  if (H <= 0 || R < 0 || N < 0 || V <= 0 || V > D) throw Error("cuda mla_pack: needs num_heads > 0 and 0 < v_dim <= rope + nope");
  const int64_t T = p.q.ndim() > 0 ? p.q.dim(0) : 0;
  if (p.q.numel() != T * H * D || p.kv.numel() != T * H * (N + V) || p.k_pe.numel() != T * R ||
      p.qkv.numel() != T * 3 * H * D)
    throw Error("cuda mla_pack: shapes do not agree (q [T, H*D], kv [T, H*(nope+v)], k_pe [T, rope], qkv [T, 3*H*D])");
  const DType dt = p.qkv.dtype;
  if (p.q.dtype != dt || p.kv.dtype != dt || p.k_pe.dtype != dt) throw Error("cuda mla_pack: all tensors must share a dtype");
  if (T == 0) return;
  const int64_t n = T * 3 * H * D;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 65535));
  dispatch_float(dt, "mla_pack", [&](auto tag) {
    using T_ = decltype(tag);
    launch_pdl(mla_pack_kernel<T_>, dim3(blocks), dim3(256), 0, stream, p.q.ptr<T_>(), p.kv.ptr<T_>(), p.k_pe.ptr<T_>(),
               p.qkv.ptr<T_>(), T, static_cast<int>(H), static_cast<int>(R), static_cast<int>(N), static_cast<int>(V));
  });
  check_launch("mla_pack");
}

}  // namespace vireo::cuda
