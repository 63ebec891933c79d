// Shared pieces of the decode GEMV kernels (gemv.cu: the grid-stride kernel; gemv_resident.cuh: the
// one-pass kernel whose weights sit in registers): arguments, the fused-prologue staging of x'.
#pragma once
#include <cstdlib>

#include "backend/cuda/activation.cuh"
#include "backend/cuda/cuda_types.cuh"
#include "backend/cuda/pdl.cuh"

namespace vireo::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kLoads = 8;                          // 16-byte weight loads in flight per lane
constexpr int64_t kPrefetchBytes = 64 << 10;       // per block, before the PDL wait
constexpr size_t kMaxStageBytes = 192 << 10;       // x' in shared memory: N * K * sizeof(T)
constexpr int kBlocksPerSm = 2;                    // __launch_bounds__ below: <= 128 registers

enum Prologue : int { kPlain = 0, kNorm = 1, kSiluMul = 2 };

struct GemvArgs {
  const void* x;         // [N, K], or [N, 2K] with kSiluMul
  const void* w;         // [M, K]
  const void* bias;      // [M] or null (activation dtype)
  const void* norm_w;    // [K] (kNorm), any float dtype
  DType norm_dt;
  bool norm_vec;         // norm_w has the activation dtype and is 16-byte aligned
  int prologue;          // Prologue
  const void* residual;  // [N, M] or null; may alias out
  void* out;             // [N, M], or [N, M / 2] with silu_out
  bool silu_out;         // rows [0, M/2) gate, [M/2, M) up: out = act(round(gate)) * round(up), rounded
  Activation act;        // silu_out's gate activation (the forms: SiLU)
  int64_t k, m;
  float eps;
  int64_t prefetch_bytes;  // per block before the PDL wait (0: none, an ordinary launch)
  float4* row_stats;       // [C] RangeStats of the output row, a range a warp (gemv_stream_rows.cuh), or null
};

// What a launch does, when known at compile time: the forms of a pre-norm decoder layer's decode GEMVs
// (qkv: norm -> out; gate_up: norm -> silu(gate) * up; o_proj and down: plain -> residual + out; lm_head:
// plain -> out), instantiated on their own so that a batch-1 layer's kernels carry none of the other
// forms' code (a batch-1 step is bound by instruction fetch: docs/cuda_kernels.md, session 15, and the
// session 19 figures). kFormAny: read from the arguments. The norm forms take norm weights of the
// activation dtype (norm_vec).
enum GemvForm : int { kFormAny = 0, kFormNormOut = 1, kFormNormSilu = 2, kFormPlainResidual = 3, kFormPlainOut = 4 };

// The prologue a form implies (stage_input's kPro), -1 for kFormAny.
constexpr int form_prologue(int form) {
  return form == kFormAny ? -1 : form == kFormNormOut || form == kFormNormSilu ? kNorm : kPlain;
}

inline GemvForm gemv_form_of(const GemvArgs& a) {
  if (a.silu_out && a.act != Activation::kSilu) return kFormAny;  // GELU (Gemma): the generic kernels
  if (a.prologue == kNorm && a.norm_vec && !a.residual) return a.silu_out ? kFormNormSilu : kFormNormOut;
  if (a.prologue == kPlain && !a.silu_out) return a.residual ? kFormPlainResidual : kFormPlainOut;
  return kFormAny;
}

// VIREO_GEMV_FORMS=0: batch-1 launches take the generic kernel (kFormAny) too (A/B).
bool forms_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("VIREO_GEMV_FORMS");
    return e == nullptr || e[0] != '0';
  }();
  return on;
}

// Bulk asynchronous copies into shared memory, completion counted on an mbarrier (the streaming and
// the bulk-resident kernels).
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint64_t* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(bar)) : "memory");
}

// The copy alone: `bytes` from src into shared dst, counted on bar (armed by the caller). evict_first
// policy: the weights are read once per step and should not push the KV cache or activations out of L2.
__device__ __forceinline__ void bulk_copy_only(void* dst, const void* src, uint32_t bytes, uint64_t* bar,
                                               uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(
          smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar)), "l"(policy)
      : "memory");
}

// Arrives on the barrier expecting `bytes` of transfer.
__device__ __forceinline__ void mbar_arrive_expect(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
}

// Arms the barrier for `bytes` of transfer and issues the copy that completes it.
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, uint32_t bytes, uint64_t* bar,
                                          uint64_t policy) {
  mbar_arrive_expect(bar, bytes);
  bulk_copy_only(dst, src, bytes, bar, policy);
}

__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n .reg .pred done;\n WAIT:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      " @!done bra WAIT;\n}" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
}

// The silu_and_mul op's element (elementwise_ops.cu): act(g) * u in fp32 on the rounded gate and up
// values, rounded. kAnyAct: the activation read from `act` (generic kernels), else SiLU (the forms).
template <typename T, bool kAnyAct = false>
__device__ __forceinline__ T act_mul_round(float g, float u, Activation act = Activation::kSilu) {
  const float gf = to_f(from_f<T>(g)), uf = to_f(from_f<T>(u));
  if constexpr (kAnyAct) return from_f<T>(gate_act(act, gf) * uf);
  else return from_f<T>(gate_act<Activation::kSilu>(gf) * uf);
}

__device__ __forceinline__ float load_any(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::kF32: return static_cast<const float*>(p)[i];
    case DType::kF16: return __half2float(static_cast<const __half*>(p)[i]);
    default: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  }
}

// Stages x' [NR, K] into xs (16-byte vectors). Ends with __syncthreads(). Every thread issues its
// global loads in batches of kStageBatch before using any of them: x was just written by the previous
// kernel (an L2 round trip each), and the SiLU form of the 8B down projection has 6 pairs a thread,
// which done one after the other cost ~4 us after the PDL wait.
constexpr int kStageBatch = 8;

// kPro: the prologue when known at compile time (kNorm then also means norm_vec), -1: a.prologue's.
template <typename T, int NR, int kPro = -1>
__device__ __forceinline__ void stage_input(const GemvArgs& a, uint4* xs, int64_t nvec) {
  using V = Vec<T>;
  constexpr int kN = V::kN;
  const uint4* x = static_cast<const uint4*>(a.x);
  const int64_t total = NR * nvec;
  const int prologue = kPro >= 0 ? kPro : a.prologue;
  const bool norm_vec = kPro >= 0 || a.norm_vec;
  if (prologue == kSiluMul) {
    // x row n: [2K] = gate then up; as silu_and_mul_kernel: g / (1 + e^-g) * u in fp32, rounded.
    for (int64_t i0 = threadIdx.x; i0 < total; i0 += int64_t{kThreads} * kStageBatch) {
      V g[kStageBatch], u[kStageBatch];
#pragma unroll
      for (int b = 0; b < kStageBatch; ++b) {
        const int64_t i = i0 + int64_t{b} * kThreads, n = i / nvec, c = i - n * nvec;
        if (i < total) {
          g[b].raw = x[n * 2 * nvec + c];
          u[b].raw = x[n * 2 * nvec + nvec + c];
        }
      }
#pragma unroll
      for (int b = 0; b < kStageBatch; ++b) {
        const int64_t i = i0 + int64_t{b} * kThreads;
        if (i >= total) break;
        V o;
#pragma unroll
        for (int e = 0; e < kN; ++e) {
          const float gf = to_f(g[b].v[e]);
          o.v[e] = from_f<T>(gf / (1.f + __expf(-gf)) * to_f(u[b].v[e]));
        }
        xs[i] = o.raw;
      }
    }
  } else if (prologue == kNorm) {
    __shared__ float red[kWarps][NR];
    float ss[NR];
#pragma unroll
    for (int n = 0; n < NR; ++n) ss[n] = 0.f;
    for (int64_t i0 = threadIdx.x; i0 < total; i0 += int64_t{kThreads} * kStageBatch) {
      V v[kStageBatch];
#pragma unroll
      for (int b = 0; b < kStageBatch; ++b) {
        const int64_t i = i0 + int64_t{b} * kThreads;
        if (i < total) v[b].raw = x[i];
      }
#pragma unroll
      for (int b = 0; b < kStageBatch; ++b) {
        const int64_t i = i0 + int64_t{b} * kThreads;
        if (i >= total) break;
        xs[i] = v[b].raw;
        float part = 0.f;
#pragma unroll
        for (int e = 0; e < kN; ++e) part += to_f(v[b].v[e]) * to_f(v[b].v[e]);
        const int n = static_cast<int>(i / nvec);
#pragma unroll
        for (int r = 0; r < NR; ++r)
          if (r == n) ss[r] += part;
      }
    }
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
    for (int n = 0; n < NR; ++n) {
      float v = ss[n];
      for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
      if (lane == 0) red[warp][n] = v;
    }
    __syncthreads();
    float inv[NR];
#pragma unroll
    for (int n = 0; n < NR; ++n) {
      float s = 0.f;
      for (int w = 0; w < kWarps; ++w) s += red[w][n];
      inv[n] = rsqrtf(s / static_cast<float>(a.k) + a.eps);  // as rms_norm_kernel
    }
    // Each thread rescales the vectors it staged itself: no barrier needed before this pass.
    for (int64_t i = threadIdx.x; i < total; i += kThreads) {
      const int64_t n = i / nvec, c = i - n * nvec;
      float sc = 0.f;
#pragma unroll
      for (int r = 0; r < NR; ++r)
        if (r == n) sc = inv[r];
      V v;
      v.raw = xs[i];
      if (norm_vec) {
        V g;
        g.raw = static_cast<const uint4*>(a.norm_w)[c];
#pragma unroll
        for (int e = 0; e < kN; ++e) v.v[e] = from_f<T>(to_f(v.v[e]) * sc * to_f(g.v[e]));
      } else {
#pragma unroll
        for (int e = 0; e < kN; ++e) v.v[e] = from_f<T>(to_f(v.v[e]) * sc * load_any(a.norm_w, a.norm_dt, c * kN + e));
      }
      xs[i] = v.raw;
    }
  } else {
    for (int64_t i0 = threadIdx.x; i0 < total; i0 += int64_t{kThreads} * kStageBatch) {
      uint4 v[kStageBatch];
#pragma unroll
      for (int b = 0; b < kStageBatch; ++b) {
        const int64_t i = i0 + int64_t{b} * kThreads;
        if (i < total) v[b] = x[i];
      }
#pragma unroll
      for (int b = 0; b < kStageBatch; ++b) {
        const int64_t i = i0 + int64_t{b} * kThreads;
        if (i < total) xs[i] = v[b];
      }
    }
  }
  __syncthreads();
}

}  // namespace
}  // namespace vireo::cuda
