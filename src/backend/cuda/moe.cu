// Sparse MoE MLP on CUDA (semantics in op_params.h MoeParams; oracle: backend/cpu/cpu_moe.cc): the
// routing kernel, the per-slot expert kernels, and launch_moe, which picks the per-slot or the grouped
// path (moe.h: VIREO_MOE_GROUPED, kMoeGroupedMinSlots). All on the device, so steps stay inside CUDA graphs:
//   route:   one block per 8 tokens (one per token past 1536 experts): router logits (each an fp32
//            chain that does not depend on the other tokens, plus router_b; kSoftmax rounds them to T,
//            as HF's bf16 linear), fp32 softmax or sigmoid (+ score bias), the group limit (lane g scores
//            group g), top-k by repeated warp argmax (lowest id among equal values), renormalised when
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
  const float* bias;  // [E] or null: the choice bias (score_bias)
  int n_group, topk_group;
  float scale;       // routed_scaling_factor (the fp32 modes: kSigmoid, kSoftmaxFp32)
  float renorm_eps;  // added to the top-k sum in the fp32 modes (DeepSeek 1e-20, LFM2-MoE 1e-6)
};

// An expert's logit from its fp32 dot: plus its router_b value when biased (GPT-OSS; HF's linear adds
// the bias before its one rounding), rounded to T in kSoftmax (HF's router linear), kept fp32 in the
// DeepSeek modes (F.linear in fp32). Both route paths store their logits through this, so they stay
// bitwise equal.
template <typename T>
__device__ __forceinline__ float router_logit(float dot, bool biased, float bias, bool fp32) {
  if (biased) dot += bias;  // no add without a bias: the former bits (-0 stays -0)
  return fp32 ? dot : to_f(from_f<T>(dot));
}

// One warp routes token t from its E logits in `logit` (shared memory, this warp's own; overwritten):
// fp32 softmax or sigmoid (+ score bias), the group limit (lane g scores group g), then top_k rounds
// of a warp argmax (lowest id among equal values); ids / weights [t * k + j] written by lane j. Both
// route paths end here, so given the same logits they give the same bits. A picked expert's entry is
// set to NaN, which never wins a comparison (nor did it before: a NaN choice never beats or equals
// best), so later rounds skip it without rescanning the earlier picks.
template <typename T>
__device__ __forceinline__ void route_select_warp(float* logit, int lane, const RouteArgs& a, int64_t t, int* ids,
                                                  float* weights) {
  const int num_experts = a.num_experts, top_k = a.top_k;
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
  const float* bias = a.bias;
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
  // This lane's experts e = lane + 32 m, m < 32 (E <= 1024): bit m set when e's group is kept (no
  // division in the rounds below); past 1024 experts the division stays.
  unsigned lane_keep = 0xffffffffu;
  if (a.n_group > 1 && num_experts <= 1024) {
    lane_keep = 0;
    for (int e = lane, m = 0; e < num_experts; e += 32, ++m) lane_keep |= ((keep >> (e / per)) & 1u) << m;
  }
  float my_w = 0.f;  // lane j: pick j's unbiased score / probability
  int my_id = 0;
  float top_sum = 0.f;  // the picks in order, on every lane
  for (int j = 0; j < top_k; ++j) {
    float best = -INFINITY;
    int best_id = 0x7fffffff;
    for (int e = lane, m = 0; e < num_experts; e += 32, ++m) {
      if (isnan(logit[e])) continue;  // picked earlier
      const bool kept = a.n_group == 1 || (num_experts <= 1024 ? (lane_keep >> m) & 1u : (keep >> (e / per)) & 1u);
      const float c = kept ? choice(e) : -INFINITY;
      if (c > best || (c == best && e < best_id)) best = c, best_id = e;
    }
    for (int o = 16; o > 0; o >>= 1) {
      const float ob = __shfl_xor_sync(0xffffffffu, best, o);
      const int oi = __shfl_xor_sync(0xffffffffu, best_id, o);
      if (ob > best || (ob == best && oi < best_id)) best = ob, best_id = oi;
    }
    if (best_id >= num_experts) best_id = 0;  // only NaN inputs leave nothing to pick; stay in bounds
    const float picked = logit[best_id];  // the unbiased score / probability
    top_sum += picked;
    if (lane == j) my_w = picked, my_id = best_id;
    __syncwarp();
    if (lane == (best_id & 31)) logit[best_id] = NAN;
    __syncwarp();
  }
  if (lane < top_k) {
    ids[t * top_k + lane] = my_id;
    if (a.fp32) {
      const float w = a.renorm ? my_w / (top_sum + a.renorm_eps) : my_w;
      weights[t * top_k + lane] = w * a.scale;  // fp32, as HF's topk_weights
    } else {
      weights[t * top_k + lane] = to_f(from_f<T>(a.renorm ? my_w / top_sum : my_w));
    }
  }
}

// grid: (ceil(T / R)); block b routes tokens b * R + [0, R): the logits of all (warps over groups of
// kRouteExperts experts), then warp r the top-k of token b * R + r. Dynamic shared memory: R * E floats.
template <typename T, int R>
__global__ void __launch_bounds__(kThreads) moe_route_kernel(const T* x, const T* router, const T* router_b,
                                                             int64_t tokens, int64_t hidden, RouteArgs a, int* ids,
                                                             float* weights) {
  static_assert(R <= kWarps, "one warp per token for the top-k");
  extern __shared__ float logits[];  // [R, E]
  const int num_experts = a.num_experts;
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
          if (q < nw && r < nr)
            logits[r * num_experts + e0 + q] =
                router_logit<T>(v[q][r], router_b != nullptr, router_b ? to_f(router_b[e0 + q]) : 0.f, a.fp32);
  }
  __syncthreads();
  if (warp >= nr) return;
  route_select_warp<T>(logits + warp * num_experts, lane, a, t0 + warp, ids, weights);
}

// ---- small-T routing (T <= kMoeRouteSmallMaxTokens: decode) ----
// The large-T kernel above reads the whole router in one block per 8 tokens: at T = 1 one block streams
// 512 KB (Qwen3-30B-A3B) with 8 warps, ~48 us. Here the logits are a GEMV spread over the chip, then a
// small selection kernel:
//   logits: grid (ceil(E / kLogitWarps), ceil(T / tpb)); warp w of block (bx, by) computes expert
//           bx * kLogitWarps + w for tokens by * tpb + [0, tpb) (x rows staged in shared memory once a
//           block). Its first kLogitChunk 16-byte router vectors a lane are loaded into registers
//           before the PDL wait (the router is a weight: no earlier kernel writes it), so at T = 1 the
//           whole router read overlaps the previous kernel. Each logit is the same fp32 chain as
//           warp_dot_block's (lane-strided vectors, in-vector order, the same butterfly), so the
//           logits, and through route_select_warp the ids and weights, are bitwise the large-T path's.
//   select: one warp per token: its E logits into shared memory, then route_select_warp.
constexpr int kLogitWarps = 4, kLogitTokens = 8, kLogitChunk = 8;
constexpr int kSelectWarps = 4;
constexpr size_t kRouteSmem = 48 * 1024;

// kTok: tokens a block at most (1, 2, 4 or 8: the unrolled code, and so the instruction fetches of a
// kernel that runs once per layer, grow with it).
template <typename T, int kTok>
__global__ void __launch_bounds__(kLogitWarps * 32) moe_router_logits_kernel(const T* x, const T* router,
                                                                             const T* router_b, int64_t tokens,
                                                                             int64_t hidden, int num_experts, int tpb,
                                                                             bool fp32, float* logits) {
  extern __shared__ uint4 xs_raw[];  // [nr, hidden] of T
  T* xs = reinterpret_cast<T*>(xs_raw);
  constexpr int kN = Vec<T>::kN;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int e = blockIdx.x * kLogitWarps + warp;  // warp-uniform
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * tpb;
  const int nr = static_cast<int>(min(static_cast<int64_t>(tpb), tokens - t0));
  // The large-T kernel's vector test (its rows start at x + t0 * hidden and router + e0 * hidden, aligned
  // exactly when the bases are once hidden % kN == 0).
  const bool vec = hidden % kN == 0 && (reinterpret_cast<uintptr_t>(x) & 15) == 0 &&
                   (reinterpret_cast<uintptr_t>(router) & 15) == 0;
  const int64_t nv = hidden / kN;  // 16-byte vectors a row
  const T* w = router + static_cast<int64_t>(min(e, num_experts - 1)) * hidden;
  const uint4* wv4 = reinterpret_cast<const uint4*>(w);
  // router_b[e] (a weight too) read up front: one register through the loop, not the pointer's two.
  const bool biased = router_b != nullptr;
  const float bias = biased && e < num_experts ? to_f(router_b[e]) : 0.f;
  Vec<T> wv[kLogitChunk];
  if (vec && e < num_experts) {
#pragma unroll
    for (int j = 0; j < kLogitChunk; ++j) {
      const int64_t i = lane + 32 * j;
      if (i < nv) wv[j].raw = __ldg(wv4 + i);
    }
  }
  pdl_enter();  // x from the previous kernel; logits may still be read by an earlier one
  const T* xt = x + t0 * hidden;
  if (vec) {  // 8 loads a thread in flight, then the stores (one L2 round trip for <= 16 KiB of x)
    const uint4* src = reinterpret_cast<const uint4*>(xt);
    constexpr int kB = 8;
    const int64_t n = nr * nv, step = static_cast<int64_t>(blockDim.x);
    for (int64_t i0 = threadIdx.x; i0 < n; i0 += kB * step) {
      uint4 v[kB];
#pragma unroll
      for (int b = 0; b < kB; ++b)
        if (i0 + b * step < n) v[b] = src[i0 + b * step];
#pragma unroll
      for (int b = 0; b < kB; ++b)
        if (i0 + b * step < n) xs_raw[i0 + b * step] = v[b];
    }
  } else {
    for (int64_t i = threadIdx.x; i < nr * hidden; i += blockDim.x) xs[i] = xt[i];
  }
  __syncthreads();
  if (e >= num_experts) return;
  float acc[kTok];
#pragma unroll
  for (int r = 0; r < kTok; ++r) acc[r] = 0.f;
  if (vec) {
    for (int64_t c0 = 0; c0 < nv; c0 += 32 * kLogitChunk) {
      if (c0 > 0) {
#pragma unroll
        for (int j = 0; j < kLogitChunk; ++j) {
          const int64_t i = c0 + lane + 32 * j;
          if (i < nv) wv[j].raw = __ldg(wv4 + i);
        }
      }
      // Vector j outer, token r inner: the tokens' chains interleave (ILP); each acc[r] still sums its
      // vectors in ascending order, as warp_dot_block does.
#pragma unroll
      for (int j = 0; j < kLogitChunk; ++j) {
        const int64_t i = c0 + lane + 32 * j;
        if (i < nv) {
#pragma unroll
          for (int r = 0; r < kTok; ++r)
            if (r < nr) {
              Vec<T> av;
              av.raw = reinterpret_cast<const uint4*>(xs + r * hidden)[i];
#pragma unroll
              for (int q = 0; q < kN; ++q) acc[r] += to_f(av.v[q]) * to_f(wv[j].v[q]);
            }
        }
      }
    }
  } else {
    for (int64_t i = lane; i < hidden; i += 32) {
      const float wf = to_f(w[i]);
#pragma unroll
      for (int r = 0; r < kTok; ++r) {
        if (r >= nr) break;
        acc[r] += to_f(xs[r * hidden + i]) * wf;
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kTok; ++r)
    for (int o = 16; o > 0; o >>= 1) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], o);
#pragma unroll
  for (int r = 0; r < kTok; ++r)
    if (r < nr && lane == r) logits[(t0 + r) * num_experts + e] = router_logit<T>(acc[r], biased, bias, fp32);
}

// grid: ceil(T / warps a block); warp w routes token blockIdx.x * warps + w. Dynamic shared memory:
// warps * E floats.
template <typename T>
__global__ void __launch_bounds__(kSelectWarps * 32) moe_route_select_kernel(const float* logits, int64_t tokens,
                                                                             RouteArgs a, int* ids, float* weights) {
  extern __shared__ float sel[];  // [warps, E]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  const int num_experts = a.num_experts;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * warps + warp;
  pdl_enter();  // logits from the logits kernel
  if (t >= tokens) return;
  float* logit = sel + warp * num_experts;
  const float* row = logits + t * num_experts;
  for (int e0 = lane; e0 < num_experts; e0 += 8 * 32) {  // 8 loads a lane in flight
    float v[8];
#pragma unroll
    for (int b = 0; b < 8; ++b)
      if (e0 + 32 * b < num_experts) v[b] = row[e0 + 32 * b];
#pragma unroll
    for (int b = 0; b < 8; ++b)
      if (e0 + 32 * b < num_experts) logit[e0 + 32 * b] = v[b];
  }
  __syncwarp();
  route_select_warp<T>(logit, lane, a, t, ids, weights);
}

void require(bool ok, const std::string& msg) {
  if (!ok) throw Error("cuda moe: " + msg);
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// router_b (GPT-OSS) is optional: [E] in the router's dtype.
void require_router_bias(const MoeParams& p, int64_t num_experts) {
  require(p.router_b.empty() || (p.router_b.dtype == p.router_w.dtype && p.router_b.numel() == num_experts),
          "router_b must be [num_experts] in the weight dtype");
}

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

std::atomic<int>& route_small_flag() {  // VIREO_MOE_ROUTE_SMALL=0: the large-T kernel at every T (A/B runs)
  static std::atomic<int> on{[] {
    const char* v = std::getenv("VIREO_MOE_ROUTE_SMALL");
    return v && std::strcmp(v, "0") == 0 ? 0 : 1;
  }()};
  return on;
}

template <typename T>
void launch_route(const MoeParams& p, const T* x, int64_t tokens, int* ids, float* wts, float* logits,
                  MoeRoutePath path, cudaStream_t stream) {
  const int64_t hidden = p.x.dim(1), E = p.router_w.dim(0);
  const bool sigmoid = p.scoring == MoeScoring::kSigmoid;
  const RouteArgs a{static_cast<int>(E), p.top_k, p.norm_topk_prob, sigmoid, p.scoring != MoeScoring::kSoftmax,
                    !p.score_bias.empty() ? p.score_bias.ptr<float>() : nullptr,
                    p.n_group, p.topk_group, p.routed_scaling_factor, p.renorm_eps};
  const T* router_b = p.router_b.empty() ? nullptr : p.router_b.ptr<T>();
  if (tokens <= 0) return;
  const size_t row_bytes = static_cast<size_t>(hidden) * sizeof(T);
  const bool small_ok = logits != nullptr && row_bytes <= kRouteSmem && E * sizeof(float) <= kRouteSmem;
  const bool small = small_ok && (path == MoeRoutePath::kSmallT ||
                                  (path == MoeRoutePath::kAuto && tokens <= kMoeRouteSmallMaxTokens &&
                                   route_small_flag().load(std::memory_order_relaxed)));
  if (small) {
    const int tpb = static_cast<int>(std::min<int64_t>({kLogitTokens, tokens, static_cast<int64_t>(kRouteSmem / row_bytes)}));
    const size_t xs_bytes = (static_cast<size_t>(tpb) * row_bytes + 15) / 16 * 16;
    const dim3 grid(static_cast<unsigned>((E + kLogitWarps - 1) / kLogitWarps),
                    static_cast<unsigned>((tokens + tpb - 1) / tpb));
    auto kernel = tpb == 1 ? moe_router_logits_kernel<T, 1>
                  : tpb == 2 ? moe_router_logits_kernel<T, 2>
                  : tpb <= 4 ? moe_router_logits_kernel<T, 4>
                             : moe_router_logits_kernel<T, kLogitTokens>;
    launch_pdl(kernel, grid, dim3(kLogitWarps * 32), xs_bytes, stream, x, p.router_w.ptr<T>(), router_b, tokens,
               hidden, static_cast<int>(E), tpb, a.fp32, logits);
    check_launch("moe router logits");
    const int warps = static_cast<int>(std::clamp<int64_t>(static_cast<int64_t>(kRouteSmem / (E * sizeof(float))), 1,
                                                           kSelectWarps));
    launch_pdl(moe_route_select_kernel<T>, dim3(static_cast<unsigned>((tokens + warps - 1) / warps)), dim3(warps * 32),
               static_cast<size_t>(warps) * E * sizeof(float), stream, static_cast<const float*>(logits), tokens, a, ids,
               wts);
    check_launch("moe route select");
    return;
  }
  if (E * kRouteTokens * sizeof(float) <= 48 * 1024)
    launch_pdl(moe_route_kernel<T, kRouteTokens>, dim3(static_cast<unsigned>((tokens + kRouteTokens - 1) / kRouteTokens)),
               dim3(kThreads), static_cast<size_t>(E * kRouteTokens) * sizeof(float), stream, x, p.router_w.ptr<T>(),
               router_b, tokens, hidden, a, ids, wts);
  else
    launch_pdl(moe_route_kernel<T, 1>, dim3(static_cast<unsigned>(tokens)), dim3(kThreads),
               static_cast<size_t>(E) * sizeof(float), stream, x, p.router_w.ptr<T>(), router_b, tokens, hidden, a, ids,
               wts);
  check_launch("moe route");
}

// Per-slot (decode) path over all T tokens (moe_decode.cu): scratch act [T * k, I], ids, weights [T * k].
template <typename T>
void launch_per_slot(const MoeParams& p, const WorkspaceFn& workspace, cudaStream_t stream) {
  const int64_t T_ = p.x.dim(0), hidden = p.x.dim(1), inter = p.inter();
  const int k = p.top_k;
  const size_t n_slots = static_cast<size_t>(T_ * k);
  const size_t n_logits = static_cast<size_t>(moe_route_scratch_floats(T_, p.router_w.dim(0)));
  auto carve = [&](Carve& c, T*& act, int*& ids, float*& wts, float*& logits) {
    act = c.take<T>(n_slots * inter);
    ids = c.take<int>(n_slots);
    wts = c.take<float>(n_slots);
    logits = n_logits ? c.take<float>(n_logits) : nullptr;
  };
  T* act;
  int* ids;
  float *wts, *logits;
  Carve size;
  carve(size, act, ids, wts, logits);
  Carve ws{static_cast<char*>(workspace(size.used))};
  carve(ws, act, ids, wts, logits);
  const MoeExtras ex = moe_extras(p);
  launch_route<T>(p, p.x.ptr<T>(), T_, ids, wts, logits, MoeRoutePath::kAuto, stream);
  if (p.mxfp4()) {
    launch_moe_gate_up_decode_mxfp4(p.x.data, p.gate_up_w.data, p.gate_up_scales.data, ids, T_, k, hidden, inter, act,
                                    stream, ex);
    launch_moe_down_decode_mxfp4(act, p.down_w.data, p.down_scales.data, ids, wts, T_, k, hidden, inter, p.out.data,
                                 stream, ex);
    return;
  }
  launch_moe_gate_up_decode(p.x.dtype, p.x.data, p.gate_up_w.data, ids, T_, k, hidden, inter, act, stream, ex);
  launch_moe_down_decode(p.x.dtype, act, p.down_w.data, ids, wts, T_, k, hidden, inter, p.out.data, stream, ex);
}

// Grouped path (moe.h), in passes of at most kMoeGroupedChunkTokens tokens sharing one scratch.
template <typename T>
void launch_grouped(const MoeParams& p, const WorkspaceFn& workspace, cudaStream_t stream) {
  const int64_t T_ = p.x.dim(0), hidden = p.x.dim(1), E = p.router_w.dim(0), inter = p.inter();
  const int k = p.top_k;
  const int64_t chunk = std::min(T_, kMoeGroupedChunkTokens);
  const int64_t max_slots = chunk * k, max_tiles = moe_max_tiles(max_slots, E);
  struct Scratch {
    int *ids, *sorted_slot, *row_of_slot, *num_tiles;
    float *wts, *logits;
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
    const int64_t n_logits = moe_route_scratch_floats(chunk, E);
    s.logits = n_logits ? c.take<float>(n_logits) : nullptr;
  };
  Carve size;
  carve(size);
  Carve ws{static_cast<char*>(workspace(size.used))};
  carve(ws);
  const DType dt = p.x.dtype;
  const MoeExtras ex = moe_extras(p);
  for (int64_t t0 = 0; t0 < T_; t0 += chunk) {
    const int64_t n = std::min(chunk, T_ - t0), slots = n * k, tiles = moe_max_tiles(slots, E);
    const T* x = p.x.ptr<T>() + t0 * hidden;
    launch_route<T>(p, x, n, s.ids, s.wts, s.logits, MoeRoutePath::kAuto, stream);
    launch_moe_sort(s.ids, slots, E, s.sorted_slot, s.row_of_slot, s.tiles, s.num_tiles, stream);
    launch_moe_gate_up_grouped(dt, x, p.gate_up_w.data, s.sorted_slot, k, s.tiles, s.num_tiles, tiles, hidden, inter,
                               s.act, stream, ex, p.mxfp4() ? p.gate_up_scales.data : nullptr);
    launch_moe_down_grouped(dt, s.act, p.down_w.data, s.tiles, s.num_tiles, tiles, hidden, inter, s.y, stream, ex,
                            p.mxfp4() ? p.down_scales.data : nullptr);
    launch_moe_combine(dt, s.y, s.ids, s.wts, s.row_of_slot, n, k, hidden, p.out.ptr<T>() + t0 * hidden, stream);
  }
}

}  // namespace

MoePath moe_path() { return static_cast<MoePath>(path_flag().load(std::memory_order_relaxed)); }
void set_moe_path(MoePath path) { path_flag().store(static_cast<int>(path), std::memory_order_relaxed); }

void launch_moe_route(const MoeParams& p, const void* x, int64_t tokens, int* ids, float* weights, float* logits,
                      MoeRoutePath path, cudaStream_t stream) {
  require(p.x.ndim() == 2 && p.router_w.ndim() == 2 && p.router_w.dim(1) == p.x.dim(1),
          "route expects x [T, hidden] and router_w [E, hidden]");
  const int64_t E = p.router_w.dim(0);
  require(p.router_w.dtype == p.x.dtype, "router_w must share x's dtype");
  require_router_bias(p, E);
  require(p.top_k >= 1 && p.top_k <= E && p.top_k <= kMaxTopK && E <= 8192, "top_k / experts out of range");
  require(p.n_group >= 1 && p.n_group <= 32 && E % p.n_group == 0 && p.topk_group >= 1 && p.topk_group <= p.n_group,
          "bad n_group / topk_group");
  dispatch_float(p.x.dtype, "moe route", [&](auto tag) {
    using T_ = decltype(tag);
    launch_route<T_>(p, static_cast<const T_*>(x), tokens, ids, weights, logits, path, stream);
  });
}

void launch_moe(const MoeParams& p, const WorkspaceFn& workspace, cudaStream_t stream) {
  require(p.x.ndim() == 2 && p.router_w.ndim() == 2 && p.gate_up_w.ndim() == 3 && p.down_w.ndim() == 3,
          "expects x [T, hidden], router_w [E, hidden], gate_up_w [E, 2I, hidden], down_w [E, hidden, I]");
  const int64_t T = p.x.dim(0), hidden = p.x.dim(1), E = p.router_w.dim(0), inter = p.inter();
  const bool fp4 = p.mxfp4();
  const int64_t packed = fp4 ? 2 : 1;  // elements a stored weight element holds
  require(p.router_w.dim(1) == hidden && p.gate_up_w.dim(0) == E && p.gate_up_w.dim(1) == 2 * inter &&
              p.gate_up_w.dim(2) * packed == hidden && p.down_w.dim(0) == E && p.down_w.dim(1) == hidden &&
              p.out.numel() == T * hidden,
          "shapes do not agree");
  const DType dt = p.x.dtype;
  require(p.out.dtype == dt && p.router_w.dtype == dt, "x, router_w and out must share the activation dtype");
  if (fp4) {
    require(dt == DType::kBF16 && hidden % 32 == 0 && inter % 32 == 0,
            "MXFP4 experts need bf16 activations and hidden, inter multiples of 32");
    require(p.gate_up_w.dtype == DType::kU8 && p.down_w.dtype == DType::kU8 && p.gate_up_scales.dtype == DType::kU8 &&
                p.down_scales.dtype == DType::kU8,
            "MXFP4 experts and scales must be U8");
    require(p.gate_up_scales.numel() == E * 2 * inter * (hidden / 32) && p.down_scales.numel() == E * hidden * (inter / 32),
            "MXFP4 scales must be [E, 2I, hidden / 32] and [E, hidden, I / 32]");
    require(aligned16(p.gate_up_w.data) && aligned16(p.down_w.data), "MXFP4 experts must be 16-byte aligned");
  } else {
    require(p.gate_up_w.dtype == dt && p.down_w.dtype == dt, "x, weights and out must share the activation dtype");
  }
  require(p.top_k >= 1 && p.top_k <= E && p.top_k <= kMaxTopK, "top_k must be in [1, min(num_experts, 32)]");
  require(E <= 8192, "at most 8192 experts");
  require(p.n_group >= 1 && p.n_group <= 32 && E % p.n_group == 0 && (p.n_group == 1 || E / p.n_group >= 2),
          "n_group must be in [1, 32], divide the number of experts and leave >= 2 experts a group");
  require(p.topk_group >= 1 && p.topk_group <= p.n_group && int64_t{p.topk_group} * (E / p.n_group) >= p.top_k,
          "topk_group must be in [1, n_group] and its groups hold >= top_k experts");
  require(p.score_bias.empty() || (p.score_bias.dtype == DType::kF32 && p.score_bias.numel() == E),
          "score_bias must be F32 [num_experts]");
  require_router_bias(p, E);
  require(p.gate_up_b.empty() || (p.gate_up_b.dtype == dt && p.gate_up_b.ndim() == 2 && p.gate_up_b.dim(0) == E &&
                                  p.gate_up_b.dim(1) == 2 * inter),
          "gate_up_b must be [num_experts, 2 * inter] in the weight dtype");
  require(p.down_b.empty() ||
              (p.down_b.dtype == dt && p.down_b.ndim() == 2 && p.down_b.dim(0) == E && p.down_b.dim(1) == hidden),
          "down_b must be [num_experts, hidden] in the weight dtype");
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
