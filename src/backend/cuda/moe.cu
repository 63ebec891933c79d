// Sparse MoE MLP on CUDA (semantics in op_params.h MoeParams; oracle: backend/cpu/cpu_moe.cc): the
// routing kernel, the per-slot expert kernels, and launch_moe, which picks the per-slot or the grouped
// path (moe.h: VIREO_MOE_GROUPED, kMoeGroupedMinSlots). All on the device, so steps stay inside CUDA graphs:
//   route:   one block per 8 tokens (one per token past 1536 experts): router logits (each an fp32
//            chain that does not depend on the other tokens; kSoftmax rounds them to T, as HF's
//            bf16 linear), fp32 softmax or sigmoid (+ score bias), the group limit (lane g scores group
//            g), top-k by repeated warp argmax (lowest id among equal values), renormalised when
//            norm_topk_prob; kSoftmax weights rounded to T, DeepSeek's scaled and kept fp32;
//            ids / weights [T, k] into scratch.
// Per-slot path (decode: a few tokens; moe_decode.cu): gate_up then down, each distinct expert's rows
//   streamed once per group of <= 16 tokens, the weighted sum in ascending expert id inside down.
// Grouped path (many tokens; moe_sort.cu, moe_grouped_gemm.cu, moe_combine.cu): slots sorted by expert,
// tensor-core GEMMs per expert with the same roundings (only the dot products' summation order differs),
// the weighted sum in the same ascending-id order.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_types.cuh"
#include "backend/cuda/moe.h"
#include "backend/cuda/pdl.cuh"

namespace vireo::cuda {
namespace {

constexpr int kThreads = 256, kWarps = kThreads / 32;
constexpr int kMaxTopK = 32;

// Routing tokens per block when E * kRouteTokens logits fit in 48 KiB of shared memory (else one),
// kRouteExperts router rows per warp at a time: each router row is read once per kRouteTokens tokens
// (one read per token was 512 KB of L2 traffic per token for Qwen3-30B-A3B, ~1 GB per 2048-token
// prefill) and each x vector serves kRouteExperts rows.
constexpr int kRouteTokens = kWarps, kRouteExperts = 4;

// acc[q][r] = sum over the warp of x_r[i] * w_q[i], i < n, for rows x_r = x + r * n (r < nr <= R) and
// w_q = w + q * n (q < nw <= NW). Each sum is the same chain whatever R, NW and the other rows
// (lane-strided 16-byte vectors when n and the rows allow, then a butterfly), so a token's logits
// do not depend on its neighbours.
template <typename T, int NW, int R>
__device__ __forceinline__ void warp_dot_block(const T* x, int nr, const T* w, int nw, int64_t n, int lane,
                                               float (&acc)[NW][R]) {
  constexpr int kN = Vec<T>::kN;
#pragma unroll
  for (int q = 0; q < NW; ++q)
#pragma unroll
    for (int r = 0; r < R; ++r) acc[q][r] = 0.f;
  const bool vec = n % kN == 0 && (reinterpret_cast<uintptr_t>(x) & 15) == 0 && (reinterpret_cast<uintptr_t>(w) & 15) == 0;
  if (vec) {
    for (int64_t i = lane; i < n / kN; i += 32) {
      Vec<T> b[NW];
#pragma unroll
      for (int q = 0; q < NW; ++q)
        if (q < nw) b[q].raw = __ldg(reinterpret_cast<const uint4*>(w + q * n) + i);  // warp-uniform guards
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if (r >= nr) break;
        Vec<T> a;
        a.raw = reinterpret_cast<const uint4*>(x + r * n)[i];
#pragma unroll
        for (int q = 0; q < NW; ++q)
          if (q < nw)
#pragma unroll
            for (int e = 0; e < kN; ++e) acc[q][r] += to_f(a.v[e]) * to_f(b[q].v[e]);
      }
    }
  } else {
    for (int64_t i = lane; i < n; i += 32)
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if (r >= nr) break;
#pragma unroll
        for (int q = 0; q < NW; ++q)
          if (q < nw) acc[q][r] += to_f(x[r * n + i]) * to_f(w[q * n + i]);
      }
  }
#pragma unroll
  for (int q = 0; q < NW; ++q)
#pragma unroll
    for (int r = 0; r < R; ++r)
      for (int o = 16; o > 0; o >>= 1) acc[q][r] += __shfl_xor_sync(0xffffffffu, acc[q][r], o);
}

// Routing settings of MoeParams the route kernel needs (device pointer for the bias).
struct RouteArgs {
  int num_experts, top_k;
  bool renorm, sigmoid, fp32;  // fp32: fp32 logits and scaled fp32 weights (kSigmoid, kSoftmaxFp32)
  const float* bias;  // [E] or null (kSigmoid only)
  int n_group, topk_group;
  float scale;  // routed_scaling_factor (kSigmoid only)
};

// grid: (ceil(T / R)); block b routes tokens b * R + [0, R): the logits of all (warps over groups of
// kRouteExperts experts), then warp r the top-k of token b * R + r. Dynamic shared memory: R * E floats.
template <typename T, int R>
__global__ void __launch_bounds__(kThreads) moe_route_kernel(const T* x, const T* router, int64_t tokens, int64_t hidden,
                                                             RouteArgs a, int* ids, float* weights) {
  static_assert(R <= kWarps, "one warp per token for the top-k");
  extern __shared__ float logits[];  // [R, E]
  const int num_experts = a.num_experts, top_k = a.top_k;
  const int64_t t0 = static_cast<int64_t>(blockIdx.x) * R;
  const int nr = static_cast<int>(min(static_cast<int64_t>(R), tokens - t0));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  pdl_enter();
  for (int e0 = warp * kRouteExperts; e0 < num_experts; e0 += kWarps * kRouteExperts) {
    const int nw = min(kRouteExperts, num_experts - e0);
    float v[kRouteExperts][R];
    warp_dot_block<T, kRouteExperts, R>(x + t0 * hidden, nr, router + static_cast<int64_t>(e0) * hidden, nw, hidden,
                                        lane, v);
    if (lane == 0)
#pragma unroll
      for (int q = 0; q < kRouteExperts; ++q)
#pragma unroll
        for (int r = 0; r < R; ++r)
          if (q < nw && r < nr)  // kSoftmax: HF's router linear rounds to T; DeepSeek: fp32 (F.linear in fp32)
            logits[r * num_experts + e0 + q] = a.fp32 ? v[q][r] : to_f(from_f<T>(v[q][r]));
  }
  __syncthreads();
  if (warp >= nr) return;
  const int64_t t = t0 + warp;
  float* logit = logits + warp * num_experts;  // this warp's token
  if (a.sigmoid) {
    for (int e = lane; e < num_experts; e += 32) logit[e] = 1.f / (1.f + expf(-logit[e]));  // now scores
  } else {
    float mx = -INFINITY;
    for (int e = lane; e < num_experts; e += 32) mx = fmaxf(mx, logit[e]);
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    float sum = 0.f;
    for (int e = lane; e < num_experts; e += 32) sum += __expf(logit[e] - mx);
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    __syncwarp();
    for (int e = lane; e < num_experts; e += 32) logit[e] = __expf(logit[e] - mx) / sum;  // now probabilities
  }
  __syncwarp();
  const float* bias = a.sigmoid ? a.bias : nullptr;
  auto choice = [&](int e) { return logit[e] + (bias ? bias[e] : 0.f); };
  // Group limit: lane g scores group g (sum of its two largest choice values); the topk_group best
  // groups (lower id first among equal scores) are kept.
  unsigned keep = 0xffffffffu;
  const int per = num_experts / a.n_group;
  if (a.n_group > 1) {
    float gs = -INFINITY;
    if (lane < a.n_group) {
      float b1 = -INFINITY, b2 = -INFINITY;
      for (int e = lane * per; e < (lane + 1) * per; ++e) {
        const float c = choice(e);
        if (c > b1) b2 = b1, b1 = c;
        else if (c > b2) b2 = c;
      }
      gs = b1 + b2;
    }
    keep = 0;
    for (int j = 0; j < a.topk_group; ++j) {
      float best = gs;
      int best_g = lane < a.n_group ? lane : 0x7fffffff;
      for (int o = 16; o > 0; o >>= 1) {
        const float ob = __shfl_xor_sync(0xffffffffu, best, o);
        const int og = __shfl_xor_sync(0xffffffffu, best_g, o);
        if (ob > best || (ob == best && og < best_g)) best = ob, best_g = og;
      }
      keep |= 1u << best_g;
      if (lane == best_g) gs = -INFINITY;
    }
  }
  float picked[kMaxTopK];
  int picked_id[kMaxTopK];
  float top_sum = 0.f;
  for (int j = 0; j < top_k; ++j) {
    float best = -INFINITY;
    int best_id = 0x7fffffff;
    for (int e = lane; e < num_experts; e += 32) {
      bool taken = false;
      for (int q = 0; q < j; ++q) taken = taken || picked_id[q] == e;
      if (taken) continue;
      const float c = (keep >> (e / per)) & 1u ? choice(e) : -INFINITY;
      if (c > best || (c == best && e < best_id)) best = c, best_id = e;
    }
    for (int o = 16; o > 0; o >>= 1) {
      const float ob = __shfl_xor_sync(0xffffffffu, best, o);
      const int oi = __shfl_xor_sync(0xffffffffu, best_id, o);
      if (ob > best || (ob == best && oi < best_id)) best = ob, best_id = oi;
    }
    picked[j] = logit[best_id];  // the unbiased score / probability
    picked_id[j] = best_id;
    top_sum += picked[j];
  }
  if (lane == 0)
    for (int j = 0; j < top_k; ++j) {
      ids[t * top_k + j] = picked_id[j];
      if (a.fp32) {
        const float w = a.renorm ? picked[j] / (top_sum + 1e-20f) : picked[j];
        weights[t * top_k + j] = w * a.scale;  // fp32, as HF's topk_weights
      } else {
        weights[t * top_k + j] = to_f(from_f<T>(a.renorm ? picked[j] / top_sum : picked[j]));
      }
    }
}

void require(bool ok, const std::string& msg) {
  if (!ok) throw Error("cuda moe: " + msg);
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

std::atomic<int>& path_flag() {
  static std::atomic<int> path{[] {
    const char* v = std::getenv("VIREO_MOE_GROUPED");
    if (v && std::strcmp(v, "0") == 0) return static_cast<int>(MoePath::kPerSlot);
    if (v && std::strcmp(v, "1") == 0) return static_cast<int>(MoePath::kGrouped);
    return static_cast<int>(MoePath::kAuto);
  }()};
  return path;
}

// Scratch carved from one workspace allocation, each piece 256-byte aligned. With base == nullptr it
// only counts the bytes.
struct Carve {
  char* base = nullptr;
  size_t used = 0;
  template <typename P>
  P* take(size_t count) {
    P* p = base ? reinterpret_cast<P*>(base + used) : nullptr;
    used += (count * sizeof(P) + 255) / 256 * 256;
    return p;
  }
};

template <typename T>
void launch_route(const MoeParams& p, const T* x, int64_t tokens, int* ids, float* wts, cudaStream_t stream) {
  const int64_t hidden = p.x.dim(1), E = p.router_w.dim(0);
  const bool sigmoid = p.scoring == MoeScoring::kSigmoid;
  const RouteArgs a{static_cast<int>(E), p.top_k, p.norm_topk_prob, sigmoid, p.scoring != MoeScoring::kSoftmax,
                    sigmoid && !p.score_bias.empty() ? p.score_bias.ptr<float>() : nullptr,
                    p.n_group, p.topk_group, p.routed_scaling_factor};
  if (E * kRouteTokens * sizeof(float) <= 48 * 1024)
    launch_pdl(moe_route_kernel<T, kRouteTokens>, dim3(static_cast<unsigned>((tokens + kRouteTokens - 1) / kRouteTokens)),
               dim3(kThreads), static_cast<size_t>(E * kRouteTokens) * sizeof(float), stream, x, p.router_w.ptr<T>(),
               tokens, hidden, a, ids, wts);
  else
    launch_pdl(moe_route_kernel<T, 1>, dim3(static_cast<unsigned>(tokens)), dim3(kThreads),
               static_cast<size_t>(E) * sizeof(float), stream, x, p.router_w.ptr<T>(), tokens, hidden, a, ids, wts);
  check_launch("moe route");
}

// Per-slot (decode) path over all T tokens (moe_decode.cu): scratch act [T * k, I], ids, weights [T * k].
template <typename T>
void launch_per_slot(const MoeParams& p, const WorkspaceFn& workspace, cudaStream_t stream) {
  const int64_t T_ = p.x.dim(0), hidden = p.x.dim(1), inter = p.down_w.dim(2);
  const int k = p.top_k;
  const size_t n_slots = static_cast<size_t>(T_ * k);
  auto carve = [&](Carve& c, T*& act, int*& ids, float*& wts) {
    act = c.take<T>(n_slots * inter);
    ids = c.take<int>(n_slots);
    wts = c.take<float>(n_slots);
  };
  T* act;
  int* ids;
  float* wts;
  Carve size;
  carve(size, act, ids, wts);
  Carve ws{static_cast<char*>(workspace(size.used))};
  carve(ws, act, ids, wts);
  launch_route<T>(p, p.x.ptr<T>(), T_, ids, wts, stream);
  launch_moe_gate_up_decode(p.x.dtype, p.x.data, p.gate_up_w.data, ids, T_, k, hidden, inter, act, stream);
  launch_moe_down_decode(p.x.dtype, act, p.down_w.data, ids, wts, T_, k, hidden, inter, p.out.data, stream);
}

// Grouped path (moe.h), in passes of at most kMoeGroupedChunkTokens tokens sharing one scratch.
template <typename T>
void launch_grouped(const MoeParams& p, const WorkspaceFn& workspace, cudaStream_t stream) {
  const int64_t T_ = p.x.dim(0), hidden = p.x.dim(1), E = p.router_w.dim(0), inter = p.down_w.dim(2);
  const int k = p.top_k;
  const int64_t chunk = std::min(T_, kMoeGroupedChunkTokens);
  const int64_t max_slots = chunk * k, max_tiles = moe_max_tiles(max_slots, E);
  struct Scratch {
    int *ids, *sorted_slot, *row_of_slot, *num_tiles;
    float* wts;
    MoeTile* tiles;
    T *act, *y;
  } s{};
  auto carve = [&](Carve& c) {
    s.ids = c.take<int>(max_slots);
    s.wts = c.take<float>(max_slots);
    s.sorted_slot = c.take<int>(max_slots);
    s.row_of_slot = c.take<int>(max_slots);
    s.tiles = c.take<MoeTile>(max_tiles);
    s.num_tiles = c.take<int>(1);
    s.act = c.take<T>(max_slots * inter);  // [S, inter] sorted rows
    s.y = c.take<T>(max_slots * hidden);   // [S, hidden] sorted rows
  };
  Carve size;
  carve(size);
  Carve ws{static_cast<char*>(workspace(size.used))};
  carve(ws);
  const DType dt = p.x.dtype;
  for (int64_t t0 = 0; t0 < T_; t0 += chunk) {
    const int64_t n = std::min(chunk, T_ - t0), slots = n * k, tiles = moe_max_tiles(slots, E);
    const T* x = p.x.ptr<T>() + t0 * hidden;
    launch_route<T>(p, x, n, s.ids, s.wts, stream);
    launch_moe_sort(s.ids, slots, E, s.sorted_slot, s.row_of_slot, s.tiles, s.num_tiles, stream);
    launch_moe_gate_up_grouped(dt, x, p.gate_up_w.data, s.sorted_slot, k, s.tiles, s.num_tiles, tiles, hidden, inter,
                               s.act, stream);
    launch_moe_down_grouped(dt, s.act, p.down_w.data, s.tiles, s.num_tiles, tiles, hidden, inter, s.y, stream);
    launch_moe_combine(dt, s.y, s.ids, s.wts, s.row_of_slot, n, k, hidden, p.out.ptr<T>() + t0 * hidden, stream);
  }
}

}  // namespace

MoePath moe_path() { return static_cast<MoePath>(path_flag().load(std::memory_order_relaxed)); }
void set_moe_path(MoePath path) { path_flag().store(static_cast<int>(path), std::memory_order_relaxed); }

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
  require(p.n_group >= 1 && p.n_group <= 32 && E % p.n_group == 0 && (p.n_group == 1 || E / p.n_group >= 2),
          "n_group must be in [1, 32], divide the number of experts and leave >= 2 experts a group");
  require(p.topk_group >= 1 && p.topk_group <= p.n_group && int64_t{p.topk_group} * (E / p.n_group) >= p.top_k,
          "topk_group must be in [1, n_group] and its groups hold >= top_k experts");
  require(p.score_bias.empty() || (p.score_bias.dtype == DType::kF32 && p.score_bias.numel() == E),
          "score_bias must be F32 [num_experts]");
  require(p.out.data != p.x.data, "out must not alias x");
  if (T == 0) return;
  const bool supported = moe_grouped_supported(
      dt, hidden, inter, aligned16(p.x.data) && aligned16(p.gate_up_w.data) && aligned16(p.down_w.data) && aligned16(p.out.data));
  const bool grouped = moe_use_grouped(moe_path(), T, p.top_k, supported);
  dispatch_float(dt, "moe", [&](auto tag) {
    using T_ = decltype(tag);
    if constexpr (!std::is_same_v<T_, float>) {
      if (grouped) {
        launch_grouped<T_>(p, workspace, stream);
        return;
      }
    }
    launch_per_slot<T_>(p, workspace, stream);
  });
}

}  // namespace vireo::cuda
