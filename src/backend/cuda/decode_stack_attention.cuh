// The attention phase of the decode-stack kernel (decode_stack.h): flash decoding over the paged KV
// cache for one query token per sequence. Work items are (token t, KV head g, key split j); an item's
// block prepares the group's q heads and the new k (per-head norm, RoPE: prepare_head, so rounding is
// qkv_prepare's), split j == 0 writes the new k / v into the cache, and every split uses the new key
// from shared memory rather than the cache (another split may not have written it yet). Each consumer
// warp takes pages of the split; warps combine in shared memory; with J > 1 splits the last split to
// arrive (a counter per (t, g)) merges the partials and writes attn, as the separate merge kernel does.
#pragma once
#include "backend/cuda/decode_stack_gemv.cuh"
#include "backend/cuda/qkv_head.cuh"

namespace vireo::cuda {
namespace {

// The layer's QkvArgs live in shared memory during the phase: prepare_head reads its fields many times,
// and a local copy would sit in local memory, which (L1 being nearly all shared memory here) is L2.
constexpr int kStackQkvArgsFloats = (sizeof(QkvArgs) + 15) / 16 * 4;

// Shared floats the attention phase needs: the QkvArgs, q [r, D], new k and v [D], RoPE rows [8, D], warp
// (max, sum) [8, r, 2], warp acc [8, r, D], and one flag word.
__host__ __device__ constexpr int64_t stack_attn_floats(int r, int d) {
  return kStackQkvArgsFloats + int64_t{r} * d + 2 * d + int64_t{kStackConsumerWarps} * d + kStackConsumerWarps * r * 2 +
         int64_t{kStackConsumerWarps} * r * d + 4;
}

constexpr int kStackPageKeys = 8;  // keys loaded together (half a page at block size 16: registers)

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// kE consecutive elements of a K or V row (one 4- or 8-byte load for 2-byte types), through L2.
template <typename T, int kE>
__device__ __forceinline__ void load_lane_elems(const T* p, float (&f)[kE]) {
  if constexpr (kE * sizeof(T) == 8) {
    const uint2 u = __ldcg(reinterpret_cast<const uint2*>(p));
    const T* e = reinterpret_cast<const T*>(&u);
#pragma unroll
    for (int i = 0; i < kE; ++i) f[i] = to_f(e[i]);
  } else if constexpr (kE * sizeof(T) == 4) {
    const unsigned u = __ldcg(reinterpret_cast<const unsigned*>(p));
    const T* e = reinterpret_cast<const T*>(&u);
#pragma unroll
    for (int i = 0; i < kE; ++i) f[i] = to_f(e[i]);
  } else {
#pragma unroll
    for (int i = 0; i < kE; ++i) f[i] = to_f(p[i]);
  }
}

// Every field of a (kernel parameters, reached through a generic pointer) is read once into a register
// here: reloading one inside the key loop costs a memory round trip per key.
template <typename T, int kE>
__device__ __forceinline__ void stack_attention(const StackArgs& a, const StackLayerArgs& L, float* sm,
                                                unsigned long long* stamp) {
  const float kNegInf = -__int_as_float(0x7f800000);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int D = a.D, r = a.H / a.Hkv, J = a.J, H = a.H, Hkv = a.Hkv, bs = a.block_size, T_ = a.T;
  const float scale = a.scale;
  const T* const k_cache = static_cast<const T*>(L.k_cache);
  const T* const v_cache = static_cast<const T*>(L.v_cache);
  T* const k_out = static_cast<T*>(L.k_cache);
  T* const v_out = static_cast<T*>(L.v_cache);
  const T* const qkv = static_cast<const T*>(a.qkv);
  T* const attn = static_cast<T*>(a.attn);
  float* const part_all = a.part;
  unsigned* const counters = a.counters;
  const int* const seq_lens = a.seq_lens;
  const int* const block_tables = a.block_tables;
  const int mbps = a.max_blocks_per_seq;
  const void* const q_norm = L.q_norm;
  const void* const k_norm = L.k_norm;
  QkvArgs* qargs = reinterpret_cast<QkvArgs*>(sm);
  float* sq = sm + kStackQkvArgsFloats;             // [r, D]
  float* sk = sq + r * D;                           // [D]
  float* sv = sk + D;                               // [D]
  float* rows = sv + D;                             // [8, D]
  float* wm = rows + kStackConsumerWarps * D;       // [8, r, 2]
  float* wacc = wm + kStackConsumerWarps * r * 2;   // [8, r, D]
  int* flag = reinterpret_cast<int*>(wacc + kStackConsumerWarps * r * D);
  if (threadIdx.x == 0) {
    *qargs = a.qa;
    qargs->q_norm = q_norm;
    qargs->k_norm = k_norm;
  }
  consumers_sync();
  const QkvArgs& qa = *qargs;
  const int64_t row_w = int64_t{H + 2 * Hkv} * D;
  const int items = T_ * Hkv * J;
  for (int item = blockIdx.x; item < items; item += gridDim.x) {
    const int t = item / (Hkv * J), g = (item / J) % Hkv, j = item % J;
    const int seq_len = seq_lens[t], pos = qa.positions[t], last = seq_len - 1;
    const T* qkv_row = qkv + t * row_w;

    // 1. q heads of group g, then the new k and v (rounded as the cache holds them).
    for (int task = warp; task <= r; task += kStackConsumerWarps) {
      float x[kPerLane];
      if (task < r) {
        prepare_head<T>(qa, qkv_row + int64_t{g * r + task} * D, pos, true, false, rows + warp * D, x);
#pragma unroll
        for (int jj = 0; jj < kPerLane; ++jj)
          if (lane + 32 * jj < D) sq[task * D + lane + 32 * jj] = to_f(from_f<T>(x[jj]));
      } else {
        prepare_head<T>(qa, qkv_row + int64_t{H + g} * D, pos, false, false, rows + warp * D, x);
        const T* vsrc = qkv_row + int64_t{H + Hkv + g} * D;
        const int slot = qa.slots[t];
#pragma unroll
        for (int jj = 0; jj < kPerLane; ++jj) {
          const int i = lane + 32 * jj;
          if (i >= D) continue;
          const T kq = from_f<T>(x[jj]), vq = vsrc[i];
          sk[i] = to_f(kq);
          sv[i] = to_f(vq);
          if (j == 0 && slot >= 0) {
            const int64_t at = (int64_t{slot} * Hkv + g) * D + i;
            k_out[at] = kq;
            v_out[at] = vq;
          }
        }
      }
    }
    consumers_sync();
    if (stamp && threadIdx.x == 0 && item == static_cast<int>(blockIdx.x)) stamp[3] = global_ns();

    // 2. This split's pages, a page a warp at a time; lane holds elements [lane kE, lane kE + kE).
    // The warp's block ids are loaded up front (lane i: its i-th page), and a page's 16 keys at once.
    const int n_pages = (seq_len + bs - 1) / bs, per = (n_pages + J - 1) / J;
    const int p0 = j * per, p1 = p0 + per < n_pages ? p0 + per : n_pages;
    float acc[kStackMaxGqa][kE], m[kStackMaxGqa], l[kStackMaxGqa];  // q stays in shared memory (registers)
#pragma unroll
    for (int h = 0; h < kStackMaxGqa; ++h) {
      m[h] = kNegInf;
      l[h] = 0.f;
#pragma unroll
      for (int e = 0; e < kE; ++e) acc[h][e] = 0.f;
    }
    const int* table = block_tables + int64_t{t} * mbps;
    for (int pw = p0 + warp; pw < p1; pw += 32 * kStackConsumerWarps) {
      const int mine = pw + lane * kStackConsumerWarps;
      const int blk_lane = mine < p1 ? table[mine] : 0;
      for (int ip = 0; ip < 32; ++ip) {
        const int p = pw + ip * kStackConsumerWarps;
        if (p >= p1) break;  // warp-uniform
        const int blk = __shfl_sync(0xffffffffu, blk_lane, ip);
        const int64_t base = (int64_t{blk} * bs * Hkv + g) * D + lane * kE;  // key i of the page: + i Hkv D
        for (int i0 = 0; i0 < bs; i0 += kStackPageKeys) {
          float kf[kStackPageKeys][kE], vf[kStackPageKeys][kE];
#pragma unroll
          for (int i = 0; i < kStackPageKeys; ++i) {
            const int key = p * bs + i0 + i;
            const int64_t at = base + int64_t{i0 + i} * Hkv * D;
            if (key < last) {
              load_lane_elems<T, kE>(k_cache + at, kf[i]);
              load_lane_elems<T, kE>(v_cache + at, vf[i]);
            } else {
#pragma unroll
              for (int e = 0; e < kE; ++e) {
                kf[i][e] = key == last ? sk[lane * kE + e] : 0.f;
                vf[i][e] = key == last ? sv[lane * kE + e] : 0.f;
              }
            }
          }
#pragma unroll
          for (int h = 0; h < kStackMaxGqa; ++h) {
            if (h >= r) break;
            float qf[kE];
#pragma unroll
            for (int e = 0; e < kE; ++e) qf[e] = sq[h * D + lane * kE + e];
            float sc[kStackPageKeys], smax = kNegInf;
#pragma unroll
            for (int i = 0; i < kStackPageKeys; ++i) {
              float d = 0.f;
#pragma unroll
              for (int e = 0; e < kE; ++e) d += qf[e] * kf[i][e];
              for (int o = 16; o > 0; o >>= 1) d += __shfl_xor_sync(0xffffffffu, d, o);
              sc[i] = p * bs + i0 + i <= last ? d * scale : kNegInf;
              smax = fmaxf(smax, sc[i]);
            }
            if (smax == kNegInf) continue;  // every key past the end
            const float mn = fmaxf(m[h], smax), corr = __expf(m[h] - mn);
            l[h] *= corr;
#pragma unroll
            for (int e = 0; e < kE; ++e) acc[h][e] *= corr;
#pragma unroll
            for (int i = 0; i < kStackPageKeys; ++i) {
              const float pr = __expf(sc[i] - mn);
              l[h] += pr;
#pragma unroll
              for (int e = 0; e < kE; ++e) acc[h][e] += pr * vf[i][e];
            }
            m[h] = mn;
          }
        }
      }
    }
    if (stamp && threadIdx.x == 0 && item == static_cast<int>(blockIdx.x)) stamp[0] = global_ns();

    // 3. Combine the warps; warp h < r finishes head g r + h of this split.
#pragma unroll
    for (int h = 0; h < kStackMaxGqa; ++h) {
      if (h >= r) break;
      if (lane == 0) {
        wm[(warp * r + h) * 2] = m[h];
        wm[(warp * r + h) * 2 + 1] = l[h];
      }
#pragma unroll
      for (int e = 0; e < kE; ++e) wacc[(warp * r + h) * D + lane * kE + e] = acc[h][e];
    }
    consumers_sync();
    if (stamp && threadIdx.x == 0 && item == static_cast<int>(blockIdx.x)) stamp[4] = global_ns();
    for (int h = warp; h < r; h += kStackConsumerWarps) {
      float M = kNegInf;
      for (int w = 0; w < kStackConsumerWarps; ++w) M = fmaxf(M, wm[(w * r + h) * 2]);
      float Ls = 0.f, A[kE];
#pragma unroll
      for (int e = 0; e < kE; ++e) A[e] = 0.f;
      for (int w = 0; w < kStackConsumerWarps; ++w) {
        const float mw = wm[(w * r + h) * 2];
        if (mw == kNegInf) continue;
        const float c = __expf(mw - M);
        Ls += wm[(w * r + h) * 2 + 1] * c;
#pragma unroll
        for (int e = 0; e < kE; ++e) A[e] += wacc[(w * r + h) * D + lane * kE + e] * c;
      }
      const int head = g * r + h;
      if (J == 1) {
        T* out = attn + (int64_t{t} * H + head) * D + lane * kE;
#pragma unroll
        for (int e = 0; e < kE; ++e) out[e] = from_f<T>(A[e] / Ls);
      } else {
        float* part = part_all + ((int64_t{t} * H + head) * J + j) * (2 + D);
        if (lane == 0) part[0] = M, part[1] = Ls;
#pragma unroll
        for (int e = 0; e < kE; ++e) part[2 + lane * kE + e] = A[e];
        __threadfence();
      }
    }
    consumers_sync();
    if (J == 1) continue;

    if (stamp && threadIdx.x == 0 && item == static_cast<int>(blockIdx.x)) stamp[1] = global_ns();
    // 4. The last split of (t, g) to arrive merges all J (threadfence reduction).
    if (threadIdx.x == 0) {
      __threadfence();
      unsigned* cnt = counters + 2 + t * Hkv + g;
      const bool is_last = atomicAdd(cnt, 1u) == static_cast<unsigned>(J - 1);
      if (is_last) *cnt = 0;  // every split has arrived: ready for the next layer
      *flag = is_last;
    }
    consumers_sync();
    if (*flag) {
      __threadfence();
      for (int h = warp; h < r; h += kStackConsumerWarps) {  // J <= 32: lane s holds split s's (max, sum)
        const int head = g * r + h;
        const float* part = part_all + (int64_t{t} * H + head) * J * (2 + D);
        const float ms = lane < J ? __ldcg(part + lane * (2 + D)) : kNegInf;
        const float ls = lane < J ? __ldcg(part + lane * (2 + D) + 1) : 0.f;
        float M = ms;
        for (int o = 16; o > 0; o >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
        const float c_lane = ms == kNegInf ? 0.f : __expf(ms - M);
        float Ls = ls * c_lane;
        for (int o = 16; o > 0; o >>= 1) Ls += __shfl_xor_sync(0xffffffffu, Ls, o);
        float A[kE];
#pragma unroll
        for (int e = 0; e < kE; ++e) A[e] = 0.f;
#pragma unroll 8
        for (int sp = 0; sp < J; ++sp) {  // the loads do not depend on each other: in flight together
          const float c = __shfl_sync(0xffffffffu, c_lane, sp);
#pragma unroll
          for (int e = 0; e < kE; ++e) A[e] += c * __ldcg(part + sp * (2 + D) + 2 + lane * kE + e);
        }
        T* out = attn + (int64_t{t} * H + head) * D + lane * kE;
#pragma unroll
        for (int e = 0; e < kE; ++e) out[e] = from_f<T>(A[e] / Ls);
      }
    }
    if (stamp && threadIdx.x == 0 && item == static_cast<int>(blockIdx.x)) stamp[2] = global_ns();
    consumers_sync();
  }
}

}  // namespace
}  // namespace vireo::cuda
