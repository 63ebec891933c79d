// The weight stream of the decode-stack kernel (decode_stack.h): how each block's share of a matrix is
// cut into chunks, the producer warp that copies them into the shared-memory ring, and the consumer
// warps' GEMV over them. Both sides walk the same chunk sequence (layer, phase, row group, column
// slice), so the ring is a plain FIFO of full / empty mbarriers.
#pragma once
#include "backend/cuda/decode_stack.h"
#include "backend/cuda/gemv_common.cuh"

namespace vireo::cuda {
namespace {

constexpr int kStackConsumerThreads = kStackConsumerWarps * 32;

// Named barrier 1 over the consumer warps only (the producer never joins a block-wide barrier).
__device__ __forceinline__ void consumers_sync() {
  asm volatile("bar.sync 1, %0;" ::"n"(kStackConsumerThreads) : "memory");
}

__device__ __forceinline__ void mbar_init_count(uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}

// One matrix of a layer as this block sees it: units of rpu rows (gate_up: gate row u and up row
// u + half), grouped 8 to a chunk (a unit a consumer warp), columns cut into slices of ksl so a chunk
// fits a ring stage. Block b owns row groups [rg0, rg1).
struct StackJob {
  const char* w;  // [rows, k] elements of es bytes
  int64_t units, k, half;
  int rpu, ksl, nsl;
  int64_t rg0, rg1;
};

enum StackPhase : int { kQkvPhase = 0, kOPhase = 1, kGateUpPhase = 2, kDownPhase = 3 };

__device__ __forceinline__ StackJob stack_job(const StackArgs& a, int layer, int phase, int es) {
  const StackLayerArgs& L = a.layers[layer];
  StackJob j{};
  const int64_t qkv_rows = int64_t{a.H + 2 * a.Hkv} * a.D;
  switch (phase) {
    case kQkvPhase: j.w = static_cast<const char*>(L.qkv_w), j.units = qkv_rows, j.k = a.hidden, j.rpu = 1; break;
    case kOPhase: j.w = static_cast<const char*>(L.o_w), j.units = a.hidden, j.k = int64_t{a.H} * a.D, j.rpu = 1; break;
    case kGateUpPhase:
      j.w = static_cast<const char*>(L.gate_up_w), j.units = a.inter, j.k = a.hidden, j.rpu = 2, j.half = a.inter;
      break;
    default: j.w = static_cast<const char*>(L.down_w), j.units = a.hidden, j.k = a.inter, j.rpu = 1; break;
  }
  const int64_t max_cols = (kStackStageBytes / (kStackConsumerWarps * j.rpu * es)) / 8 * 8;
  j.ksl = static_cast<int>(j.k < max_cols ? j.k : max_cols);
  j.nsl = static_cast<int>((j.k + j.ksl - 1) / j.ksl);
  const int64_t groups = (j.units + kStackConsumerWarps - 1) / kStackConsumerWarps, g = gridDim.x;
  j.rg0 = blockIdx.x * groups / g;
  j.rg1 = (blockIdx.x + 1) * groups / g;
  return j;
}

// The ring position both sides advance chunk by chunk.
struct RingPos {
  int stage = 0;
  uint32_t parity = 0;
  __device__ __forceinline__ void next(int stages) {
    if (++stage == stages) stage = 0, parity ^= 1;
  }
};

// Lane 0 of the producer warp: every chunk of every layer, in the consumers' order. The weights are
// read once a step: evict-first, so the KV cache and the activations keep L2.
// gate: with a.gate_attention, the producer holds layer l's o_proj chunks back until *gate > l (the
// consumers' attention phase is over), so the latency-bound attention loads do not queue behind a
// ring's worth of weight copies.
template <typename T>
__device__ void stack_producer(const StackArgs& a, char* ring, uint64_t* full, uint64_t* empty, volatile int* gate) {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  constexpr int es = sizeof(T);
  const int num_layers = a.num_layers, stages = a.stages;
  const bool gated = a.gate_attention != 0;
  RingPos rp;
  for (int l = 0; l < num_layers; ++l)
    for (int ph = kQkvPhase; ph <= kDownPhase; ++ph) {
      if (ph == kOPhase && gated)
        while (*gate <= l) __nanosleep(64);
      const StackJob j = stack_job(a, l, ph, es);
      for (int64_t rg = j.rg0; rg < j.rg1; ++rg) {
        const int64_t u0 = rg * kStackConsumerWarps;
        const int nu = static_cast<int>(j.units - u0 < kStackConsumerWarps ? j.units - u0 : kStackConsumerWarps);
        for (int s = 0; s < j.nsl; ++s) {
          const int64_t c0 = int64_t{s} * j.ksl;
          const int cols = static_cast<int>(j.k - c0 < j.ksl ? j.k - c0 : j.ksl);
          const uint32_t row_bytes = static_cast<uint32_t>(cols * es);
          mbar_wait(&empty[rp.stage], rp.parity ^ 1);
          mbar_arrive_expect(&full[rp.stage], row_bytes * nu * j.rpu);
          char* dst = ring + static_cast<int64_t>(rp.stage) * kStackStageBytes;
          for (int part = 0; part < j.rpu; ++part)
            for (int w = 0; w < nu; ++w) {
              const int64_t row = u0 + w + part * j.half;
              bulk_copy_only(dst + static_cast<int64_t>(part * kStackConsumerWarps + w) * j.ksl * es,
                             j.w + (row * j.k + c0) * es, row_bytes, &full[rp.stage], policy);
            }
          rp.next(stages);
        }
      }
    }
}

// Consumer side of one matrix: warp w takes unit rg * 8 + w of each chunk, lanes stride its columns in
// 16-byte vectors against x' (xs: [NR, xstride] vectors, rows past T zero). After a row group's last
// slice the warp reduces and epi(unit, acc) runs on every lane (acc[part][n]: all lanes hold the sums).
template <typename T, int NR, typename Epi>
__device__ __forceinline__ void stack_gemv(const StackJob j, const uint4* xs, int xstride, const char* ring,
                                           uint64_t* full, uint64_t* empty, RingPos& rp, int stages, Epi&& epi) {
  using V = Vec<T>;
  constexpr int kN = V::kN;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int64_t rg = j.rg0; rg < j.rg1; ++rg) {
    const int64_t unit = rg * kStackConsumerWarps + warp;
    const bool valid = unit < j.units;
    float acc[2][NR];
#pragma unroll
    for (int p = 0; p < 2; ++p)
#pragma unroll
      for (int n = 0; n < NR; ++n) acc[p][n] = 0.f;
    for (int s = 0; s < j.nsl; ++s) {
      mbar_wait(&full[rp.stage], rp.parity);
      if (valid) {
        const int64_t c0 = int64_t{s} * j.ksl;
        const int nv = static_cast<int>((j.k - c0 < j.ksl ? j.k - c0 : j.ksl) / kN);
        const uint4* wst = reinterpret_cast<const uint4*>(ring + static_cast<int64_t>(rp.stage) * kStackStageBytes);
        const uint4* xc = xs + c0 / kN;
#pragma unroll
        for (int p = 0; p < 2; ++p) {
          if (p >= j.rpu) break;
          const uint4* wr = wst + static_cast<int64_t>(p * kStackConsumerWarps + warp) * (j.ksl / kN);
          for (int c = lane; c < nv; c += 32) {
            V wv;
            wv.raw = wr[c];
            float wf[kN];
#pragma unroll
            for (int e = 0; e < kN; ++e) wf[e] = to_f(wv.v[e]);
#pragma unroll
            for (int n = 0; n < NR; ++n) {
              V xv;
              xv.raw = xc[n * xstride + c];
#pragma unroll
              for (int e = 0; e < kN; ++e) acc[p][n] += wf[e] * to_f(xv.v[e]);
            }
          }
        }
      }
      __syncwarp();
      if (lane == 0) mbar_arrive(&empty[rp.stage]);
      rp.next(stages);
    }
    if (!valid) continue;  // warp-uniform
#pragma unroll
    for (int p = 0; p < 2; ++p)
#pragma unroll
      for (int n = 0; n < NR; ++n)
        for (int o = 16; o > 0; o >>= 1) acc[p][n] += __shfl_xor_sync(0xffffffffu, acc[p][n], o);
    epi(unit, acc);
  }
}

// x' = round(rmsnorm(x) * w) of T rows of K into xs (as stage_input's kNorm prologue), all consumer
// threads over each row's vectors; the row and norm-weight loads are issued together (one L2 trip).
// red: shared [8 warps][NR] floats.
template <typename T, int NR>
__device__ __forceinline__ void stack_stage_norm(const T* x, const T* w, int T_, int64_t k, float eps, uint4* xs,
                                                 int xstride, float* red) {
  using V = Vec<T>;
  constexpr int kN = V::kN;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int nv = static_cast<int>(k / kN);
  const uint4* wr = reinterpret_cast<const uint4*>(w);
  float ss[NR];
#pragma unroll
  for (int n = 0; n < NR; ++n) {
    ss[n] = 0.f;
    if (n >= T_) continue;
    const uint4* xr = reinterpret_cast<const uint4*>(x + n * k);
    for (int c = threadIdx.x; c < nv; c += kStackConsumerThreads) {
      V v;
      v.raw = __ldcg(xr + c);
      if (n == 0) asm volatile("prefetch.global.L1 [%0];" ::"l"(wr + c));  // for the second pass
      xs[n * xstride + c] = v.raw;
#pragma unroll
      for (int e = 0; e < kN; ++e) ss[n] += to_f(v.v[e]) * to_f(v.v[e]);
    }
  }
#pragma unroll
  for (int n = 0; n < NR; ++n) {
    for (int o = 16; o > 0; o >>= 1) ss[n] += __shfl_xor_sync(0xffffffffu, ss[n], o);
    if (lane == 0) red[warp * NR + n] = ss[n];
  }
  consumers_sync();
#pragma unroll
  for (int n = 0; n < NR; ++n) {
    if (n >= T_) continue;
    float tot = 0.f;
    for (int q = 0; q < kStackConsumerWarps; ++q) tot += red[q * NR + n];
    const float inv = rsqrtf(tot / static_cast<float>(k) + eps);
    for (int c = threadIdx.x; c < nv; c += kStackConsumerThreads) {  // the vectors this thread staged
      V v, g;
      v.raw = xs[n * xstride + c];
      g.raw = wr[c];
#pragma unroll
      for (int e = 0; e < kN; ++e) v.v[e] = from_f<T>(to_f(v.v[e]) * inv * to_f(g.v[e]));
      xs[n * xstride + c] = v.raw;
    }
  }
  consumers_sync();
}

// xs rows [0, T) = x (T rows of K), read through L2 (written by other blocks in this launch).
template <typename T>
__device__ __forceinline__ void stack_stage_copy(const T* x, int T_, int64_t k, uint4* xs, int xstride) {
  const int nv = static_cast<int>(k / Vec<T>::kN);
  const uint4* src = reinterpret_cast<const uint4*>(x);
  for (int i = threadIdx.x; i < T_ * nv; i += kStackConsumerThreads) {
    const int n = i / nv, c = i - n * nv;
    xs[n * xstride + c] = __ldcg(src + i);
  }
  consumers_sync();
}

}  // namespace
}  // namespace vireo::cuda
