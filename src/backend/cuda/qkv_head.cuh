// The fused Q/K path of one head, done by one warp: per-head RMSNorm (before or after RoPE) and RoPE
// (NeoX halves or GPT-J pairs, partial rotary) in fp32 registers. Shared by the qkv_prepare kernels
// (qkv_prepare.cu) and the decode attention kernel that prepares its own q and new k
// (attention_mma.cu, fused mode), so both round exactly alike.
#pragma once
#include <cstdint>
#include <cstdlib>

#include "backend/cuda/cuda_types.cuh"
#include "backend/op_params.h"

namespace vireo::cuda {

struct QkvArgs {
  const void* qkv;       // [T, (H + 2*Hkv) * D]; nullptr in MmaArgs: not fused
  const int* positions;  // [T]
  const float* cos_sin;  // [max_pos, rotary_dim]
  int max_pos;           // rows of cos_sin: a position outside [0, max_pos) gives NaN q/k (never a read past it)
  const int* slots;      // [T]; < 0: k/v not written
  const void* q_norm;
  const void* k_norm;
  DType q_norm_dt, k_norm_dt;
  void* q_out;
  void* k_cache;
  void* v_cache;
  int num_heads, num_kv_heads, head_dim, rotary_dim;
  bool neox;
  bool vec;  // 16-byte loads and stores: head_dim * sizeof(T) % 16 == 0 and aligned base pointers
  QkNorm qk_norm;
  float eps;
};

// qkv_prepare's argument checks and kernel arguments (qkv_prepare.cu); throws vireo::Error.
QkvArgs make_qkv_args(const QkvPrepareParams& p);

namespace {

constexpr int kMaxHeadDim = 256;            // the register path holds up to 8 values per lane
constexpr int kPerLane = kMaxHeadDim / 32;  // 8

__device__ __forceinline__ float load_w(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::kF32: return static_cast<const float*>(p)[i];
    case DType::kF16: return __half2float(static_cast<const __half*>(p)[i]);
    default: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  }
}

// Element of lane's j-th value: lane-strided (lane + 32 j), or pairs 64 (j / 2) + 2 lane + j % 2
// (4-byte loads and stores of 2-byte types).
__device__ __forceinline__ int lane_elem(bool pairs, int lane, int j) {
  return pairs ? 64 * (j / 2) + 2 * lane + (j % 2) : lane + 32 * j;
}

// The constants of a token's heads (q and k norm weights, RoPE coefficients), loaded once for many heads.
template <int KPL>
struct HeadCoeffs {
  float wq[KPL], wk[KPL], rc[KPL], rs[KPL];
  bool poison;
};
template <int KPL>
__device__ __forceinline__ void load_head_coeffs(const QkvArgs& a, int pos, bool pairs, HeadCoeffs<KPL>& c) {
  const int lane = threadIdx.x % 32, d = a.head_dim, rd = a.rotary_dim;
  const bool norm = a.qk_norm == QkNorm::kPerHeadBeforeRope || a.qk_norm == QkNorm::kPerHeadAfterRope;
  const float* cs = rd > 0 && pos >= 0 && pos < a.max_pos ? a.cos_sin + static_cast<int64_t>(pos) * rd : nullptr;
  c.poison = rd > 0 && cs == nullptr;
  const int half = rd / 2;
#pragma unroll
  for (int j = 0; j < KPL; ++j) {  // prepare_head_from's loads, for both weights
    const int i = lane_elem(pairs, lane, j);
    c.wq[j] = norm && i < d ? load_w(a.q_norm, a.q_norm_dt, i) : 0.f;
    c.wk[j] = norm && i < d ? load_w(a.k_norm, a.k_norm_dt, i) : 0.f;
    c.rc[j] = 1.f;
    c.rs[j] = 0.f;
    if (i < rd && cs != nullptr) {
      const int k = a.neox ? (i < half ? i : i - half) : i / 2;
      const bool first = a.neox ? i < half : (i % 2 == 0);
      c.rc[j] = cs[k];
      c.rs[j] = first ? -cs[half + k] : cs[half + k];
    }
  }
}

// prepare_head's body over any source of the raw values: pair_at(j, i) = the 4 bytes of elements i, i + 1
// (pairs; the lane's values j, j + 1), elem_at(i) = element i (not pairs). KPL values a lane: kPerLane,
// or D / 32 when the head dim D is known (a lane's values past D are zero, so the sums are the same).
// kGiven: the constants come from *given (load_head_coeffs: the same values) instead of being loaded here.
// kFast: the caller guarantees pairs, NeoX RoPE over the whole head and head dim 32 KPL (KPL 2 or 4), so
// the index math is known at compile time and a value's RoPE partner is in the lane's own registers
// (D 128: value j ^ 2) or lane ^ 16's (D 64) instead of a shared-memory exchange: the same arithmetic
// on the same values, with less code on the batch-1 path (instruction fetch dominates there).
template <typename T, int KPL, bool kGiven = false, bool kFast = false, typename PairAt, typename ElemAt>
__device__ __forceinline__ void prepare_head_from(const QkvArgs& a, PairAt&& pair_at, ElemAt&& elem_at, int pos,
                                                  bool is_q, bool pairs, float* row, float (&x)[KPL],
                                                  const HeadCoeffs<KPL>* given = nullptr) {
  constexpr int kPerLane = KPL;  // this body's loops
  static_assert(!kFast || KPL == 2 || KPL == 4, "kFast: head dim 64 or 128");
  if constexpr (kFast) pairs = true;
  const int lane = threadIdx.x % 32, d = kFast ? 32 * KPL : a.head_dim;
  float w[kPerLane];
  const void* wp = is_q ? a.q_norm : a.k_norm;
  const DType wt = is_q ? a.q_norm_dt : a.k_norm_dt;
  const bool norm = a.qk_norm == QkNorm::kPerHeadBeforeRope || a.qk_norm == QkNorm::kPerHeadAfterRope;
#pragma unroll
  for (int j = 0; j < kPerLane; j += 2) {
    const int i = lane_elem(pairs, lane, j);
    const int i1 = lane_elem(pairs, lane, j + 1);
    if (kFast || pairs) {
      if (kFast || i < d) {  // i even, i + 1 < d (d even)
        const unsigned u = pair_at(j, i);
        const T* e = reinterpret_cast<const T*>(&u);
        x[j] = to_f(e[0]);
        x[j + 1] = to_f(e[1]);
      } else {
        x[j] = x[j + 1] = 0.f;
      }
    } else {
      x[j] = i < d ? to_f(elem_at(i)) : 0.f;
      x[j + 1] = i1 < d ? to_f(elem_at(i1)) : 0.f;
    }
    if constexpr (kGiven) {
      w[j] = is_q ? given->wq[j] : given->wk[j];
      w[j + 1] = is_q ? given->wq[j + 1] : given->wk[j + 1];
    } else if constexpr (kFast) {  // norm weights of type T (qkv_fast_form): one 4-byte load a pair
      if (norm) {
        const unsigned u = *reinterpret_cast<const unsigned*>(static_cast<const T*>(wp) + i);
        const T* e = reinterpret_cast<const T*>(&u);
        w[j] = to_f(e[0]);
        w[j + 1] = to_f(e[1]);
      } else {
        w[j] = w[j + 1] = 0.f;
      }
    } else {
      w[j] = norm && i < d ? load_w(wp, wt, i) : 0.f;
      w[j + 1] = norm && i1 < d ? load_w(wp, wt, i1) : 0.f;
    }
  }
  // RoPE coefficients of this lane's rotary elements: c, s with new = x * c + partner * s.
  const int rd = a.rotary_dim, half = rd / 2;
  float rc[kPerLane], rs[kPerLane];
  bool poison = false;
  if (rd > 0) {
    if constexpr (kGiven) {
      poison = given->poison;
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) {
        rc[j] = given->rc[j];
        rs[j] = given->rs[j];
      }
    } else if constexpr (kFast) {  // rd = D = 32 KPL, NeoX, pairs: element i = 64 (j / 2) + 2 lane + j % 2
      constexpr int kHalf = 16 * KPL;
      const float* cs = pos >= 0 && pos < a.max_pos ? a.cos_sin + static_cast<int64_t>(pos) * (2 * kHalf) : nullptr;
      poison = cs == nullptr;
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) {
        const int i = lane_elem(true, lane, j);
        const bool first = i < kHalf;
        const int k = first ? i : i - kHalf;
        rc[j] = cs != nullptr ? cs[k] : 1.f;
        rs[j] = cs == nullptr ? 0.f : first ? -cs[kHalf + k] : cs[kHalf + k];
      }
    } else {
      const float* cs = pos >= 0 && pos < a.max_pos ? a.cos_sin + static_cast<int64_t>(pos) * rd : nullptr;
      poison = cs == nullptr;
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) {
        const int i = lane_elem(pairs, lane, j);
        rc[j] = 1.f;
        rs[j] = 0.f;
        if (i < rd && cs != nullptr) {
          // NeoX: pairs (k, k + half); GPT-J: (2k, 2k + 1). x1' = x1 c - x2 s, x2' = x2 c + x1 s.
          const int k = a.neox ? (i < half ? i : i - half) : i / 2;
          const bool first = a.neox ? i < half : (i % 2 == 0);
          rc[j] = cs[k];
          rs[j] = first ? -cs[half + k] : cs[half + k];
        }
      }
    }
  }
  auto rms = [&]() {
    float ss = 0.f;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) ss += x[j] * x[j];
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    const float inv = rsqrtf(ss / d + a.eps);
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) x[j] = x[j] * inv * w[j];
  };
  if (a.qk_norm == QkNorm::kPerHeadBeforeRope) rms();
  if constexpr (kFast) {
    float xo[kPerLane];  // the values before rotation (the generic path's row)
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) xo[j] = x[j];
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      if (poison) {
        x[j] = __int_as_float(0x7fc00000);
        continue;
      }
      // D 128: elements j and j ^ 2 of a lane are i and i +- 64; D 64: lane ^ 16 holds i +- 32.
      const float partner = KPL == 4 ? xo[j ^ 2] : __shfl_xor_sync(0xffffffffu, xo[j], 16);
      x[j] = x[j] * rc[j] + partner * rs[j];
    }
  } else if (rd > 0) {
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int i = lane_elem(pairs, lane, j);
      if (i < d) row[i] = x[j];
    }
    __syncwarp();
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int i = lane_elem(pairs, lane, j);
      if (i >= rd) continue;
      if (poison) {
        x[j] = __int_as_float(0x7fc00000);
        continue;
      }
      const int partner = a.neox ? (i < half ? i + half : i - half) : (i ^ 1);
      x[j] = x[j] * rc[j] + row[partner] * rs[j];
    }
    __syncwarp();  // row may be reused by this warp's next head
  }
  if (a.qk_norm == QkNorm::kPerHeadAfterRope) rms();
}

// q head (is_q) or k head of one token: src = its D raw values, pos = the token's position. Leaves the
// normed, rotated values in x (lane_elem order, fp32, zero past D). row: this warp's >= D floats of
// shared memory (the RoPE partner exchange). All global loads (head, norm weight, cos/sin) are issued
// before the first use. Per-head norms only (a full-width norm needs every head of the token).
// KPL: kPerLane, or D / 32 where the caller knows the head dim D (less code on a latency path).
template <typename T, int KPL, bool kFast = false>
__device__ __forceinline__ void prepare_head(const QkvArgs& a, const T* src, int pos, bool is_q, bool pairs,
                                             float* row, float (&x)[KPL]) {
  prepare_head_from<T, KPL, false, kFast>(
      a, [&](int, int i) { return *reinterpret_cast<const unsigned*>(src + i); }, [&](int i) { return src[i]; }, pos, is_q,
      pairs, row, x);
}

// Whether prepare_head's kFast form applies to these arguments at head dim d, for activations (qkv) of
// dtype act (2 bytes): 16-byte rows, NeoX RoPE over the whole head, norm weights (if any) of dtype act.
// VIREO_QKV_FAST=0 turns the fast form off (A/B runs).
inline bool qkv_fast_form(const QkvArgs& a, int d, DType act) {
  static const bool on = [] {
    const char* v = std::getenv("VIREO_QKV_FAST");
    return !(v && v[0] == '0');
  }();
  const bool norm = a.qk_norm == QkNorm::kPerHeadBeforeRope || a.qk_norm == QkNorm::kPerHeadAfterRope;
  return on && a.vec && a.neox && a.rotary_dim == d && (d == 64 || d == 128) && dtype_size(act) == 2 &&
         (a.qk_norm == QkNorm::kNone || (norm && a.q_norm_dt == act && a.k_norm_dt == act &&
                                         (reinterpret_cast<uintptr_t>(a.q_norm) & 3) == 0 &&
                                         (reinterpret_cast<uintptr_t>(a.k_norm) & 3) == 0));
}

// Stores a pair of values rounded to T at dst[0, 2): one 4-byte store (2-byte types) or 2-byte store
// (KvFp8 codes); F32 (never stored in pairs) element by element.
template <typename T>
__device__ __forceinline__ void store_pair(T* dst, float x0, float x1) {
  const T e[2] = {from_f<T>(x0), from_f<T>(x1)};
  if constexpr (sizeof(T) == 2) *reinterpret_cast<unsigned*>(dst) = *reinterpret_cast<const unsigned*>(e);
  else if constexpr (sizeof(T) == 1) *reinterpret_cast<uint16_t*>(dst) = *reinterpret_cast<const uint16_t*>(e);
  else dst[0] = e[0], dst[1] = e[1];
}

// Stores x (lane_elem order) rounded to T (an activation type, or KvFp8: a cache's codes) at dst[0, d):
// global or shared memory.
template <typename T, int KPL>
__device__ __forceinline__ void store_head(T* dst, int d, bool pairs, const float (&x)[KPL]) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int j = 0; j < KPL; j += 2) {
    const int i = lane_elem(pairs, lane, j);
    const int i1 = lane_elem(pairs, lane, j + 1);
    if (pairs) {
      if (i < d) store_pair(dst + i, x[j], x[j + 1]);
    } else {
      if (i < d) dst[i] = from_f<T>(x[j]);
      if (i1 < d) dst[i1] = from_f<T>(x[j + 1]);
    }
  }
}

}  // namespace
}  // namespace vireo::cuda
