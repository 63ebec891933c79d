// The fused Q/K path (three kernels: a warp per (token, head) for few tokens; for many, a block of warps
// per token that loads several heads a warp first (2-byte types, head dim 64 / 128, per-head norms);
// otherwise, and for the full-width norm, a block per token in fp32 shared memory). The block-per-token
// kernel: split qkv, optional q/k RMSNorm (per head or full width, before or after RoPE), RoPE (NeoX halves or GPT-J pairs, partial rotary), write q to q_out
// and k, v into the paged cache at slot_mapping (slot < 0: skipped). Math in fp32 in shared memory.
#include <cstdlib>
#include <type_traits>

#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_types.cuh"
#include "backend/cuda/gemv_common.cuh"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/qkv_head.cuh"

namespace vireo::cuda {
namespace {

// RMSNorm over `n` values of buf with weight w[0, n) (block-wide when full_width, else per head).
__device__ void rms_block(float* buf, int n, const void* w, DType wt, float eps, float* scratch) {
  float ss = 0.f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) ss += buf[i] * buf[i];
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = ss;
  __syncthreads();
  float tot = 0.f;
  for (int k = 0; k < static_cast<int>(blockDim.x / 32); ++k) tot += scratch[k];
  const float inv = rsqrtf(tot / n + eps);
  for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] = buf[i] * inv * load_w(w, wt, i);
  __syncthreads();
}

__device__ void rms_per_head(float* buf, int num, int d, const void* w, DType wt, float eps) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nw = blockDim.x / 32;
  for (int h = warp; h < num; h += nw) {
    float* x = buf + h * d;
    float ss = 0.f;
    for (int i = lane; i < d; i += 32) ss += x[i] * x[i];
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    const float inv = rsqrtf(ss / d + eps);
    for (int i = lane; i < d; i += 32) x[i] = x[i] * inv * load_w(w, wt, i);
  }
}

// Rotates the first rotary_dim values of each of `num` heads in buf; cs == nullptr (position outside
// the table) poisons them with NaN instead, as out-of-range ids do in embedding.
__device__ void rope_heads(float* buf, int num, int d, int rd, bool neox, const float* cs) {
  const int half = rd / 2;
  for (int i = threadIdx.x; i < num * half; i += blockDim.x) {
    const int h = i / half, k = i % half;
    float* x = buf + h * d;
    const int i1 = neox ? k : 2 * k, i2 = neox ? k + half : 2 * k + 1;
    if (cs == nullptr) {
      x[i1] = x[i2] = __int_as_float(0x7fc00000);
      continue;
    }
    const float c = cs[k], s = cs[half + k];
    const float a = x[i1], b = x[i2];
    x[i1] = a * c - b * s;
    x[i2] = b * c + a * s;
  }
}

// C: the cache's element type (T, or KvFp8 for an FP8 cache: codes of the fp32 values).
template <typename T, typename C>
__global__ void qkv_prepare_kernel(QkvArgs a) {
  extern __shared__ float smem[];  // [(H + Hkv) * D] fp32 q then k
  __shared__ float scratch[32];
  pdl_enter();  // launched with PDL (pdl.cuh): qkv comes from the previous kernel
  const int64_t t = blockIdx.x;
  const int h = a.num_heads, hk = a.num_kv_heads, d = a.head_dim;
  const int nq = h * d, nk = hk * d;
  using V = Vec<T>;
  constexpr int kN = V::kN;
  const T* row = static_cast<const T*>(a.qkv) + t * static_cast<int64_t>(nq + 2 * nk);
  if (a.vec) {
    for (int i = threadIdx.x; i < (nq + nk) / kN; i += blockDim.x) {
      V v;
      v.raw = reinterpret_cast<const uint4*>(row)[i];
#pragma unroll
      for (int e = 0; e < kN; ++e) smem[i * kN + e] = to_f(v.v[e]);
    }
  } else {
    for (int i = threadIdx.x; i < nq + nk; i += blockDim.x) smem[i] = to_f(row[i]);
  }
  __syncthreads();
  float* q = smem;
  float* k = smem + nq;
  if (a.qk_norm == QkNorm::kFullWidth) {
    rms_block(q, nq, a.q_norm, a.q_norm_dt, a.eps, scratch);
    rms_block(k, nk, a.k_norm, a.k_norm_dt, a.eps, scratch);
  } else if (a.qk_norm == QkNorm::kPerHeadBeforeRope) {
    rms_per_head(q, h, d, a.q_norm, a.q_norm_dt, a.eps);
    rms_per_head(k, hk, d, a.k_norm, a.k_norm_dt, a.eps);
    __syncthreads();
  }
  if (a.rotary_dim > 0) {
    const int pos = a.positions[t];
    const float* cs = pos >= 0 && pos < a.max_pos ? a.cos_sin + static_cast<int64_t>(pos) * a.rotary_dim : nullptr;
    rope_heads(smem, h + hk, d, a.rotary_dim, a.neox, cs);  // q and k heads are contiguous in smem
    __syncthreads();
  }
  if (a.qk_norm == QkNorm::kPerHeadAfterRope) {
    rms_per_head(q, h, d, a.q_norm, a.q_norm_dt, a.eps);
    rms_per_head(k, hk, d, a.k_norm, a.k_norm_dt, a.eps);
    __syncthreads();
  }
  T* qo = static_cast<T*>(a.q_out) + t * static_cast<int64_t>(nq);
  const int slot = a.slots[t];
  // Cache layout [num_blocks, block_size, Hkv, D]: a slot's Hkv*D values are contiguous.
  C* kc = static_cast<C*>(a.k_cache) + static_cast<int64_t>(slot) * nk;
  C* vc = static_cast<C*>(a.v_cache) + static_cast<int64_t>(slot) * nk;
  const T* v = row + nq + nk;
  if constexpr (!std::is_same_v<C, T>) {  // FP8 cache: element by element (this kernel: full-width norms)
    for (int i = threadIdx.x; i < nq; i += blockDim.x) qo[i] = from_f<T>(q[i]);
    if (slot < 0) return;
    for (int i = threadIdx.x; i < nk; i += blockDim.x) {
      kc[i] = from_f<C>(k[i]);
      vc[i] = from_f<C>(to_f(v[i]));
    }
    return;
  }
  if (a.vec) {
    auto pack = [&](const float* src, int i) {
      V o;
#pragma unroll
      for (int e = 0; e < kN; ++e) o.v[e] = from_f<T>(src[i * kN + e]);
      return o.raw;
    };
    for (int i = threadIdx.x; i < nq / kN; i += blockDim.x) reinterpret_cast<uint4*>(qo)[i] = pack(q, i);
    if (slot < 0) return;
    for (int i = threadIdx.x; i < nk / kN; i += blockDim.x) {
      reinterpret_cast<uint4*>(kc)[i] = pack(k, i);
      reinterpret_cast<uint4*>(vc)[i] = reinterpret_cast<const uint4*>(v)[i];
    }
    return;
  }
  for (int i = threadIdx.x; i < nq; i += blockDim.x) qo[i] = from_f<T>(q[i]);
  if (slot < 0) return;
  for (int i = threadIdx.x; i < nk; i += blockDim.x) {
    kc[i] = from_f<C>(k[i]);
    vc[i] = from_f<C>(to_f(v[i]));
  }
}

// Small-T path (decode): one warp per (token, head) over the H q heads, Hkv k heads and Hkv v heads of
// a token, kHeadWarps heads per block, so a single token spreads over (H + 2*Hkv) / kHeadWarps blocks
// instead of one. Per-head norms only (a full-width norm needs all heads of a token: the block path).
// The math is prepare_head (qkv_head.cuh), shared with the fused decode attention.
constexpr int kHeadWarps = 4;
constexpr int64_t kHeadPathMaxTokens = 1024;

// KPL: values a lane (kPerLane, or D / 32 where the head dim D is known); kFast: prepare_head's fast form
// (qkv_fast_form), the decode path of the Qwen3 / Llama shapes. Every form gives the same bits.
// C: the cache's element type (T, or KvFp8).
template <typename T, int KPL, bool kFast, typename C = T>
__global__ void __launch_bounds__(kHeadWarps * 32) qkv_prepare_heads_kernel(QkvArgs a, int blocks_per_token) {
  __shared__ float xs[kHeadWarps][kMaxHeadDim];
  pdl_enter();  // launched with PDL (pdl.cuh): before any access; no block-wide barrier follows, so
                // warps may return on their own
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t t = blockIdx.x / blocks_per_token;
  const int hh = (blockIdx.x % blocks_per_token) * kHeadWarps + warp;
  const int h = a.num_heads, hk = a.num_kv_heads, d = a.head_dim;
  if (hh >= h + 2 * hk) return;
  const int64_t width = static_cast<int64_t>(h + 2 * hk) * d;
  const T* src = static_cast<const T*>(a.qkv) + t * width + static_cast<int64_t>(hh) * d;
  const int slot = a.slots[t];
  if (hh >= h + hk) {  // a v head: copied unchanged into the cache
    if (slot < 0) return;
    C* dst = static_cast<C*>(a.v_cache) + static_cast<int64_t>(slot) * hk * d + static_cast<int64_t>(hh - h - hk) * d;
    // Every load before any store: dst may alias src for all the compiler knows, so a load-store loop
    // makes each of the lane's d / 32 loads wait for the previous store (one L2 round trip each).
    T v[KPL];
#pragma unroll
    for (int j = 0; j < KPL; ++j)
      if (lane + 32 * j < d) v[j] = src[lane + 32 * j];
#pragma unroll
    for (int j = 0; j < KPL; ++j)
      if (lane + 32 * j < d) {
        if constexpr (std::is_same_v<C, T>) dst[lane + 32 * j] = v[j];
        else dst[lane + 32 * j] = from_f<C>(to_f(v[j]));
      }
    return;
  }
  const bool is_q = hh < h;
  if (!is_q && slot < 0) return;  // a k head with nothing to write
  // 2-byte T with d * sizeof(T) % 16 == 0 and 16-byte aligned bases (vec): 4-byte pair loads/stores.
  const bool pairs = sizeof(T) == 2 && a.vec;
  float x[KPL];
  prepare_head<T, KPL, kFast>(a, src, a.positions[t], is_q, pairs, xs[warp], x);
  if (is_q) store_head<T>(static_cast<T*>(a.q_out) + (t * h + hh) * static_cast<int64_t>(d), d, kFast || pairs, x);
  else store_head<C>(static_cast<C*>(a.k_cache) + static_cast<int64_t>(slot) * hk * d + static_cast<int64_t>(hh - h) * d, d,
                     kFast || pairs, x);
}

// Many tokens, 2-byte types, head dim 64 or 128, per-head norms (the prefill steps of the Qwen3 / Llama /
// HunYuan shapes): a block of kTokWarps warps per token, warp w taking the token's heads w, w + kTokWarps,
// ... The token's whole qkv row comes into shared memory by one bulk copy (8 KB at the 0.6B shape, 12 KB at
// the 8B's) while the threads load the position and RoPE row; then each warp runs prepare_head's code on its
// heads (the warp-per-head kernel's math, lane for lane), so the two give the same bits and the choice
// between them may follow the step's size even in batch-invariant mode.
//
// The bytes in flight are what bound it: each block's life is a few dependent round trips (position -> RoPE
// row, the row's copy) for 8-12 KB. Measured (session 24, ncu, one 8,192-token prefill step a layer; 0.6B /
// 8B us): the warp-per-head and block-per-token kernels ~37% of HBM at 16k tokens; the heads loaded into
// registers, 8 ahead a warp at 80-88 registers (2-3 blocks an SM) 88.9 / 118.4, 2 ahead at 48 (5 blocks)
// 73.1 / 102.9; the row by bulk copy (~40 registers, 6 blocks) 61.0 / 85.1, ~52-56% of HBM.
constexpr int kTokWarps = 8;
// Rows up to this size (dynamic shared memory without an opt-in, beside `rows`): every shape to 128 heads of
// D 128. Larger rows take the kernels of steps without this one (per-head, or the fp32 block kernel over
// 1,024 tokens outside batch-invariant mode), as with VIREO_QKV_TOKENS=0.
constexpr int kTokMaxRowBytes = 32 * 1024;

// C: the cache's element type (T, or KvFp8). kFast: prepare_head's fast form (qkv_fast_form: the Qwen3 /
// Llama shapes), each value's RoPE partner in the lane's registers instead of a shared-memory exchange with
// two warp barriers a head (the same bits).
template <typename T, int D, typename C = T, bool kFast = false>
__global__ void __launch_bounds__(kTokWarps * 32, 6) qkv_prepare_tokens_kernel(QkvArgs a) {
  static_assert(sizeof(T) == 2 && D % 64 == 0, "pairs of 2-byte values: lane_elem(true, lane, j)");
  constexpr int kPL = D / 32;  // values a lane: elements 64 (j / 2) + 2 lane + j % 2
  __shared__ float rows[kTokWarps][D];
  __shared__ uint64_t bar;
  extern __shared__ __align__(16) unsigned char row_raw[];  // the token's qkv row [nh, D]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t t = blockIdx.x;
  const int h = a.num_heads, hk = a.num_kv_heads, nh = h + 2 * hk;
  const uint32_t bytes = static_cast<uint32_t>(nh) * D * sizeof(T);
  if (threadIdx.x == 0) {
    mbar_init(&bar);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  pdl_enter();  // launched with PDL (pdl.cuh): qkv comes from the previous kernel
  if (threadIdx.x == 0) {
    uint64_t policy;  // read once: evict first
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
    bulk_copy(row_raw, static_cast<const T*>(a.qkv) + t * (static_cast<int64_t>(nh) * D), bytes, &bar, policy);
  }
  const int slot = a.slots[t];
  HeadCoeffs<kPL> coeffs;  // the token's constants, loaded once for the warp's heads (beside the copy)
  load_head_coeffs<kPL>(a, a.positions[t], true, coeffs);
  mbar_wait(&bar, 0);
  const unsigned* row = reinterpret_cast<const unsigned*>(row_raw) + lane;  // pairs: element 2 lane + 64 jj
  for (int hh = warp; hh < nh; hh += kTokWarps) {
    unsigned raw[kPL / 2];
#pragma unroll
    for (int jj = 0; jj < kPL / 2; ++jj) raw[jj] = row[hh * (D / 2) + 32 * jj];
    if (hh >= h + hk) {  // a v head: copied unchanged into the cache (or its codes into an FP8 cache)
      if (slot < 0) continue;
      C* vdst = static_cast<C*>(a.v_cache) + (static_cast<int64_t>(slot) * hk + (hh - h - hk)) * D + 2 * lane;
#pragma unroll
      for (int jj = 0; jj < kPL / 2; ++jj) {
        if constexpr (std::is_same_v<C, T>) {
          *reinterpret_cast<unsigned*>(vdst + 64 * jj) = raw[jj];
        } else {
          const T* e = reinterpret_cast<const T*>(&raw[jj]);
          store_pair(vdst + 64 * jj, to_f(e[0]), to_f(e[1]));
        }
      }
      continue;
    }
    const bool is_q = hh < h;
    if (!is_q && slot < 0) continue;  // a k head with nothing to write
    float x[kPL];
    prepare_head_from<T, kPL, true, kFast>(
        a, [&](int j, int) { return raw[j / 2]; }, [](int) { return T(); }, 0, is_q, true, rows[warp], x, &coeffs);
    if (is_q) {
      T* dst = static_cast<T*>(a.q_out) + (t * h + hh) * static_cast<int64_t>(D) + 2 * lane;
#pragma unroll
      for (int jj = 0; jj < kPL / 2; ++jj) store_pair(dst + 64 * jj, x[2 * jj], x[2 * jj + 1]);
    } else {
      C* dst = static_cast<C*>(a.k_cache) + (static_cast<int64_t>(slot) * hk + (hh - h)) * D + 2 * lane;
#pragma unroll
      for (int jj = 0; jj < kPL / 2; ++jj) store_pair(dst + 64 * jj, x[2 * jj], x[2 * jj + 1]);
    }
  }
}

}  // namespace

QkvArgs make_qkv_args(const QkvPrepareParams& p) {
  const int h = p.num_heads, hk = p.num_kv_heads, d = p.head_dim;
  if (h <= 0 || hk <= 0 || d <= 0 || h % hk != 0) throw Error("qkv_prepare: bad num_heads/num_kv_heads/head_dim");
  const int64_t t = p.positions.numel();
  if (p.qkv.numel() != t * (h + 2 * hk) * d) throw Error("qkv_prepare: qkv must be [T, (H + 2*Hkv) * D]");
  if (p.q_out.numel() != t * h * d) throw Error("qkv_prepare: q_out must be [T, H, D]");
  if (p.q_out.dtype != p.qkv.dtype) throw Error("qkv_prepare: q_out must have the activation dtype");
  if ((p.k_cache.dtype != p.qkv.dtype && p.k_cache.dtype != DType::kF8E4M3) || p.v_cache.dtype != p.k_cache.dtype)
    throw Error("qkv_prepare: the caches must have the activation dtype, or both be F8_E4M3");
  if (p.rotary_dim < 0 || p.rotary_dim > d || p.rotary_dim % 2 != 0) throw Error("qkv_prepare: bad rotary_dim");
  if (p.positions.dtype != DType::kI32 || p.slot_mapping.dtype != DType::kI32)
    throw Error("qkv_prepare: positions and slot_mapping must be I32");
  if (p.rotary_dim > 0 && p.rope_cos_sin.dtype != DType::kF32) throw Error("qkv_prepare: rope_cos_sin must be F32");
  if (p.rotary_dim > 0 && (p.rope_cos_sin.ndim() != 2 || p.rope_cos_sin.dim(1) != p.rotary_dim))
    throw Error("qkv_prepare: rope_cos_sin must be [max_positions, rotary_dim]");
  if (p.qk_norm != QkNorm::kNone) {
    const int64_t qn = p.qk_norm == QkNorm::kFullWidth ? int64_t{h} * d : d;
    const int64_t kn = p.qk_norm == QkNorm::kFullWidth ? int64_t{hk} * d : d;
    if (p.q_norm.numel() != qn || p.k_norm.numel() != kn) throw Error("qkv_prepare: q_norm/k_norm have the wrong size");
  }
  const int max_pos = p.rotary_dim > 0 ? static_cast<int>(p.rope_cos_sin.dim(0)) : 0;
  QkvArgs a{p.qkv.data, p.positions.ptr<int>(), p.rope_cos_sin.ptr<float>(), max_pos, p.slot_mapping.ptr<int>(),
            p.q_norm.data, p.k_norm.data, p.q_norm.dtype, p.k_norm.dtype, p.q_out.data, p.k_cache.data,
            p.v_cache.data, h, hk, d, p.rotary_dim, p.neox, false, p.qk_norm, p.norm_eps};
  auto al16 = [](const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15) == 0; };
  a.vec = (static_cast<size_t>(d) * dtype_size(p.qkv.dtype)) % 16 == 0 && al16(p.qkv.data) && al16(p.q_out.data) &&
          al16(p.k_cache.data) && al16(p.v_cache.data);
  return a;
}

void launch_qkv_prepare(const QkvPrepareParams& p, cudaStream_t stream, bool batch_invariant) {
  const QkvArgs a = make_qkv_args(p);
  const int h = p.num_heads, hk = p.num_kv_heads, d = p.head_dim;
  const int64_t t = p.positions.numel();
  if (t == 0) return;
  const size_t smem = static_cast<size_t>(h + hk) * d * sizeof(float);
  // Few tokens: a warp per head over many blocks (latency); many tokens: a block per token (its
  // measured throughput at 16k tokens is the bar). The full-width norm always takes the block path.
  // Many tokens of 2-byte types at head dim 64 / 128 (16-byte rows): the token-per-block kernel, the same
  // bits as the warp-per-head one, so it serves batch-invariant mode too (VIREO_QKV_TOKENS=0 turns it
  // off, for A/B runs). Otherwise batch-invariant mode takes the warp-per-head kernel at every T (it and
  // the fp32 block kernel sum a head's squares in different orders, so the choice must not follow T).
  static const bool tokens_on = [] {
    const char* v = std::getenv("VIREO_QKV_TOKENS");
    return !(v && v[0] == '0');
  }();
  const bool per_head =
      p.qk_norm != QkNorm::kFullWidth && d <= kMaxHeadDim && (batch_invariant || t <= kHeadPathMaxTokens);
  const bool tokens = tokens_on && t > kHeadPathMaxTokens && p.qk_norm != QkNorm::kFullWidth && a.vec &&
                      dtype_size(p.qkv.dtype) == 2 && (d == 64 || d == 128) &&
                      static_cast<int64_t>(h + 2 * hk) * d * 2 <= kTokMaxRowBytes;
  dispatch_float(p.qkv.dtype, "qkv_prepare", [&](auto tag) {
    using T = decltype(tag);
    dispatch_cache<T>(p.k_cache.dtype, [&](auto ctag) {
      using C = decltype(ctag);  // T, or KvFp8 (--kv-cache-dtype fp8)
      if constexpr (sizeof(T) == 2) {
        if (tokens) {
          const dim3 grid(static_cast<unsigned>(t)), block(kTokWarps * 32);
          const size_t row_bytes = static_cast<size_t>(h + 2 * hk) * d * sizeof(T);
          const bool fast = qkv_fast_form(a, d, p.qkv.dtype);
          if (d == 64)
            launch_pdl(fast ? qkv_prepare_tokens_kernel<T, 64, C, true> : qkv_prepare_tokens_kernel<T, 64, C, false>,
                       grid, block, row_bytes, stream, a);
          else
            launch_pdl(fast ? qkv_prepare_tokens_kernel<T, 128, C, true> : qkv_prepare_tokens_kernel<T, 128, C, false>,
                       grid, block, row_bytes, stream, a);
          return;
        }
      }
      if (per_head) {
        const int bpt = (h + 2 * hk + kHeadWarps - 1) / kHeadWarps;
        const dim3 grid(static_cast<unsigned>(t * bpt)), block(kHeadWarps * 32);
        if constexpr (sizeof(T) == 2) {
          if (qkv_fast_form(a, d, p.qkv.dtype)) {  // less code on the decode path (the 8B's batch-1 layer)
            if (d == 64) launch_pdl(qkv_prepare_heads_kernel<T, 2, true, C>, grid, block, 0, stream, a, bpt);
            else launch_pdl(qkv_prepare_heads_kernel<T, 4, true, C>, grid, block, 0, stream, a, bpt);
            return;
          }
        }
        launch_pdl(qkv_prepare_heads_kernel<T, kPerLane, false, C>, grid, block, 0, stream, a, bpt);
        return;
      }
      if (smem > 48 * 1024)
        VIREO_CUDA_CHECK(cudaFuncSetAttribute(qkv_prepare_kernel<T, C>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              static_cast<int>(smem)));
      launch_pdl(qkv_prepare_kernel<T, C>, dim3(static_cast<unsigned>(t)), dim3(256), smem, stream, a);
    });
  });
  check_launch("qkv_prepare");
}

}  // namespace vireo::cuda
