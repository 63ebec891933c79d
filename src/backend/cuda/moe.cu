// Sparse MoE MLP on CUDA (semantics in op_params.h MoeParams; oracle: backend/cpu/cpu_moe.cc).
// Three kernels, all on the device (so decode steps stay inside CUDA graphs):
//   route:   one block per token: router logits (rounded to T, as HF's bf16 linear), fp32 softmax,
//            top-k by repeated warp argmax (lowest id among equal probabilities), renormalised when
//            norm_topk_prob, weights rounded to T; ids / weights [T, k] into scratch.
//   gate_up: one warp per (token, slot, intermediate index): the gate and up rows of the slot's expert,
//            act[T * k, I] = silu(round(gate)) * round(up), rounded (the dense path's rounding).
//   down:    one warp per (token, output column): for the token's slots in ascending expert id (HF's
//            index_add_ order), acc = round(acc + round(round(act . down_e[j]) * weight)).
// Every (token, slot) reads its expert's rows, so weights are re-read per token: right for decode
// (a few tokens), slow for long prefills (a grouped GEMM over tokens sorted by expert is the next step).
#include <algorithm>
#include <string>

#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_types.cuh"
#include "backend/cuda/pdl.cuh"

namespace vireo::cuda {
namespace {

constexpr int kThreads = 256, kWarps = kThreads / 32;
constexpr int kMaxTopK = 32;

// Sum over a warp of a[i] * b[i], i < n (16-byte vectors when n and both rows allow it).
template <typename T>
__device__ __forceinline__ float warp_dot(const T* a, const T* b, int64_t n, int lane) {
  float acc = 0.f;
  constexpr int kN = Vec<T>::kN;
  const bool vec = n % kN == 0 && (reinterpret_cast<uintptr_t>(a) & 15) == 0 && (reinterpret_cast<uintptr_t>(b) & 15) == 0;
  if (vec) {
    const uint4* av = reinterpret_cast<const uint4*>(a);
    const uint4* bv = reinterpret_cast<const uint4*>(b);
    for (int64_t i = lane; i < n / kN; i += 32) {
      Vec<T> x, y;
      x.raw = av[i];
      y.raw = __ldg(bv + i);
#pragma unroll
      for (int e = 0; e < kN; ++e) acc += to_f(x.v[e]) * to_f(y.v[e]);
    }
  } else {
    for (int64_t i = lane; i < n; i += 32) acc += to_f(a[i]) * to_f(b[i]);
  }
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  return acc;
}

template <typename T>
__global__ void __launch_bounds__(kThreads) moe_route_kernel(const T* x, const T* router, int64_t hidden, int num_experts,
                                                             int top_k, bool renorm, int* ids, float* weights) {
  extern __shared__ float logit[];  // [E]
  const int t = blockIdx.x, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  pdl_enter();
  const T* xr = x + static_cast<int64_t>(t) * hidden;
  for (int e = warp; e < num_experts; e += kWarps) {
    const float v = warp_dot(xr, router + static_cast<int64_t>(e) * hidden, hidden, lane);
    if (lane == 0) logit[e] = to_f(from_f<T>(v));
  }
  __syncthreads();
  if (warp != 0) return;
  float mx = -INFINITY;
  for (int e = lane; e < num_experts; e += 32) mx = fmaxf(mx, logit[e]);
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  float sum = 0.f;
  for (int e = lane; e < num_experts; e += 32) sum += __expf(logit[e] - mx);
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  __syncwarp();
  for (int e = lane; e < num_experts; e += 32) logit[e] = __expf(logit[e] - mx) / sum;  // now probabilities
  __syncwarp();
  float picked[kMaxTopK];
  int picked_id[kMaxTopK];
  float top_sum = 0.f;
  for (int j = 0; j < top_k; ++j) {
    float best = -1.f;
    int best_id = 0x7fffffff;
    for (int e = lane; e < num_experts; e += 32)
      if (logit[e] > best || (logit[e] == best && e < best_id)) best = logit[e], best_id = e;
    for (int o = 16; o > 0; o >>= 1) {
      const float ob = __shfl_xor_sync(0xffffffffu, best, o);
      const int oi = __shfl_xor_sync(0xffffffffu, best_id, o);
      if (ob > best || (ob == best && oi < best_id)) best = ob, best_id = oi;
    }
    picked[j] = best;
    picked_id[j] = best_id;
    top_sum += best;
    __syncwarp();
    if (lane == 0) logit[best_id] = -2.f;  // below every probability: not picked again
    __syncwarp();
  }
  if (lane == 0)
    for (int j = 0; j < top_k; ++j) {
      ids[t * top_k + j] = picked_id[j];
      weights[t * top_k + j] = to_f(from_f<T>(renorm ? picked[j] / top_sum : picked[j]));
    }
}

// grid: (T * k, ceil(I / kWarps)); warp w of block (s, b) computes intermediate index b * kWarps + w.
template <typename T>
__global__ void __launch_bounds__(kThreads) moe_gate_up_kernel(const T* x, const T* gate_up, const int* ids, int64_t hidden,
                                                               int64_t inter, int top_k, T* act) {
  const int64_t s = blockIdx.x;
  const int64_t i = static_cast<int64_t>(blockIdx.y) * kWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  pdl_enter();
  if (i >= inter) return;
  const int e = ids[s];
  const T* xr = x + (s / top_k) * hidden;
  const T* w = gate_up + static_cast<int64_t>(e) * 2 * inter * hidden;
  const float g = warp_dot(xr, w + i * hidden, hidden, lane);
  const float u = warp_dot(xr, w + (inter + i) * hidden, hidden, lane);
  if (lane == 0) {
    const float gf = to_f(from_f<T>(g)), uf = to_f(from_f<T>(u));
    act[s * inter + i] = from_f<T>(gf / (1.f + __expf(-gf)) * uf);
  }
}

// grid: (T, ceil(hidden / kWarps)); warp w of block (t, b) computes output column b * kWarps + w.
template <typename T>
__global__ void __launch_bounds__(kThreads) moe_down_kernel(const T* act, const T* down, const int* ids, const float* weights,
                                                            int64_t hidden, int64_t inter, int top_k, T* out) {
  const int64_t t = blockIdx.x;
  const int64_t j = static_cast<int64_t>(blockIdx.y) * kWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  pdl_enter();
  if (j >= hidden) return;
  float acc = 0.f;
  int prev = -1;
  for (int n = 0; n < top_k; ++n) {  // slots in ascending expert id (ids of a token are distinct)
    int slot = -1, e = 0x7fffffff;
    for (int q = 0; q < top_k; ++q) {
      const int id = ids[t * top_k + q];
      if (id > prev && id < e) e = id, slot = q;
    }
    prev = e;
    const int64_t s = t * top_k + slot;
    const float y = warp_dot(act + s * inter, down + (static_cast<int64_t>(e) * hidden + j) * inter, inter, lane);
    acc = to_f(from_f<T>(acc + to_f(from_f<T>(to_f(from_f<T>(y)) * weights[s]))));
  }
  if (lane == 0) out[t * hidden + j] = from_f<T>(acc);
}

void require(bool ok, const std::string& msg) {
  if (!ok) throw Error("cuda moe: " + msg);
}

}  // namespace

void launch_moe(const MoeParams& p, const WorkspaceFn& workspace, cudaStream_t stream) {
  require(p.x.ndim() == 2 && p.router_w.ndim() == 2 && p.gate_up_w.ndim() == 3 && p.down_w.ndim() == 3,
          "expects x [T, hidden], router_w [E, hidden], gate_up_w [E, 2I, hidden], down_w [E, hidden, I]");
  const int64_t T = p.x.dim(0), hidden = p.x.dim(1), E = p.router_w.dim(0), inter = p.down_w.dim(2);
  require(p.router_w.dim(1) == hidden && p.gate_up_w.dim(0) == E && p.gate_up_w.dim(1) == 2 * inter &&
              p.gate_up_w.dim(2) == hidden && p.down_w.dim(0) == E && p.down_w.dim(1) == hidden &&
              p.out.numel() == T * hidden,
          "shapes do not agree");
  const DType dt = p.x.dtype;
  require(p.out.dtype == dt && p.router_w.dtype == dt && p.gate_up_w.dtype == dt && p.down_w.dtype == dt,
          "x, weights and out must share the activation dtype");
  require(p.top_k >= 1 && p.top_k <= E && p.top_k <= kMaxTopK, "top_k must be in [1, min(num_experts, 32)]");
  require(E <= 8192, "at most 8192 experts");
  require(p.out.data != p.x.data, "out must not alias x");
  if (T == 0) return;
  const int k = p.top_k;
  const size_t n_slots = static_cast<size_t>(T * k);
  const size_t act_bytes = (n_slots * inter * dtype_size(dt) + 255) / 256 * 256;
  char* ws = static_cast<char*>(workspace(act_bytes + n_slots * (sizeof(int) + sizeof(float)) + 256));
  void* act = ws;
  int* ids = reinterpret_cast<int*>(ws + act_bytes);
  float* wts = reinterpret_cast<float*>(ws + act_bytes + (n_slots * sizeof(int) + 255) / 256 * 256);
  dispatch_float(dt, "moe", [&](auto tag) {
    using T_ = decltype(tag);
    launch_pdl(moe_route_kernel<T_>, dim3(static_cast<unsigned>(T)), dim3(kThreads), static_cast<size_t>(E) * sizeof(float),
               stream, p.x.ptr<T_>(), p.router_w.ptr<T_>(), hidden, static_cast<int>(E), k, p.norm_topk_prob, ids, wts);
    check_launch("moe route");
    launch_pdl(moe_gate_up_kernel<T_>, dim3(static_cast<unsigned>(n_slots), static_cast<unsigned>((inter + kWarps - 1) / kWarps)),
               dim3(kThreads), 0, stream, p.x.ptr<T_>(), p.gate_up_w.ptr<T_>(), ids, hidden, inter, k, static_cast<T_*>(act));
    check_launch("moe gate_up");
    launch_pdl(moe_down_kernel<T_>, dim3(static_cast<unsigned>(T), static_cast<unsigned>((hidden + kWarps - 1) / kWarps)),
               dim3(kThreads), 0, stream, static_cast<const T_*>(act), p.down_w.ptr<T_>(), ids, wts, hidden, inter, k,
               p.out.ptr<T_>());
    check_launch("moe down");
  });
}

}  // namespace vireo::cuda
