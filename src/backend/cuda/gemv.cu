// linear for a handful of rows (decode: N <= 4), bf16/f16, with the fused decode forms of
// LinearParams. Three kernels: the register-resident one-pass kernel for small matrices
// (gemv_resident.cuh), the bulk-copy streaming kernel for large ones (gemv_stream.cuh), and this
// file's grid-stride kernel for the shapes neither takes. A memory-bound GEMV:
//   - matrices up to VIREO_GEMV_PDL_MAX_MB (default 16) are launched as PDL dependents, and each block
//     pulls (up to 64 KiB of) its weight rows into L2 before the wait: weights never depend on the
//     previous kernel, so their stream overlaps its tail. Larger ones are ordinary launches: on the
//     H200, in a graph of back-to-back launches, PDL sped up the latency-bound Qwen3-0.6B shapes
//     (0.6B decode 795 -> 897 tok/s) but slowed every 8B shape (gate_up with norm 52 -> 66 us, down
//     with silu 34 -> 40 us; 8B decode 196 -> 167 tok/s), with or without the prefetch;
//   - after it, the block stages x' [N, K] in shared memory once: x itself, rmsnorm(x) * g (fp32 sum of
//     squares, block reduction; input_norm) or silu(x[:, :K]) * x[:, K:] (silu_mul_input), rounded
//     to the activation dtype exactly as the rms_norm / silu_and_mul kernels round;
//   - warps stream weight rows (RPW adjacent rows per warp, 8 16-byte evict-first loads in flight per
//     lane), blocks grid-stride over groups of 8 * RPW rows (at most 2 blocks per SM, so the prologue
//     is done ~2 x SMs times, not once per 8 rows);
//   - epilogue: + bias, rounded; with residual, out = round(residual + that), read and written by the
//     same lane (out may alias residual).
#include <algorithm>
#include <cstdlib>

#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_types.cuh"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/gemv_common.cuh"
#include "backend/cuda/gemv_resident.cuh"
#include "backend/cuda/gemv_stream.cuh"

namespace vireo::cuda {
namespace {

int64_t pdl_max_bytes() {
  static const int64_t v = [] {
    const char* e = std::getenv("VIREO_GEMV_PDL_MAX_MB");
    return int64_t{e ? std::atoi(e) : 16} << 20;
  }();
  return v;
}

template <typename T, int NR, int RPW>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm) gemv_kernel(GemvArgs a) {
  using V = Vec<T>;
  constexpr int kN = V::kN;
  constexpr int kU = kLoads / RPW;  // loads per row per iteration
  constexpr int kRowsPerGroup = kWarps * RPW;
  extern __shared__ uint4 xs[];  // x' [NR, K]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t k = a.k, m = a.m, nvec = k / kN;
  // silu_out (launched with RPW == 2 only): a warp's two rows are the gate and up rows of one index,
  // group g holds indices [g * kWarps, (g + 1) * kWarps).
  const int64_t half = a.silu_out ? m / 2 : 0;
  const int64_t groups = a.silu_out ? (half + kWarps - 1) / kWarps : (m + kRowsPerGroup - 1) / kRowsPerGroup;
  auto row_of = [&](int64_t g, int r) {  // the weight row; valid when < m (and, silu_out, its index < half)
    if (!a.silu_out) return g * kRowsPerGroup + static_cast<int64_t>(warp) * RPW + r;
    const int64_t i = g * kWarps + warp;
    return i < half ? i + r * half : m;
  };

  // 1. Independent of the previous kernel: this block's first weight rows into L2 (a hint only).
  {
    const char* wb = static_cast<const char*>(a.w);
    int64_t budget = a.prefetch_bytes;
    for (int64_t g = blockIdx.x; g < groups && budget > 0 && !a.silu_out; g += gridDim.x) {
      const int64_t r0 = g * kRowsPerGroup;
      const int64_t rows = m - r0 < kRowsPerGroup ? m - r0 : kRowsPerGroup;
      const int64_t want = rows * k * static_cast<int64_t>(sizeof(T));
      const int64_t bytes = want < budget ? want : budget;
      const char* base = wb + r0 * k * static_cast<int64_t>(sizeof(T));
      for (int64_t off = static_cast<int64_t>(threadIdx.x) * 128; off < bytes; off += kThreads * 128)
        prefetch_l2(base + off);
      budget -= bytes;
    }
  }
  // The first iteration's weight loads are issued now, so their latency overlaps the wait and the
  // staging of x' (measured: the norm / SiLU prologue cost 3-6 us a GEMV when done first).
  const T* w = static_cast<const T*>(a.w);
  uint4 pre[RPW][kU];
  bool have_pre = false;
  if (blockIdx.x < groups) {
#pragma unroll
    for (int u = 0; u < kU; ++u)
#pragma unroll
      for (int r = 0; r < RPW; ++r) {
        const int64_t c = lane + 32 * u, row = row_of(blockIdx.x, r);
        pre[r][u] = (row < m && c < nvec) ? __ldcs(reinterpret_cast<const uint4*>(w + row * k) + c)
                                          : make_uint4(0, 0, 0, 0);
      }
    have_pre = true;
  }

  // 2. x, residual and out may belong to the previous kernel: wait for it.
  pdl_enter();
  stage_input<T, NR>(a, xs, nvec);

  // 3. Stream the weights.
  const T* bias = static_cast<const T*>(a.bias);
  const T* res = static_cast<const T*>(a.residual);
  T* out = static_cast<T*>(a.out);
  for (int64_t g = blockIdx.x; g < groups; g += gridDim.x) {
    const int64_t row0 = g * kRowsPerGroup + static_cast<int64_t>(warp) * RPW;
    const uint4* wr[RPW];
    bool ok[RPW];
#pragma unroll
    for (int r = 0; r < RPW; ++r) {
      const int64_t row = row_of(g, r);
      ok[r] = row < m;
      wr[r] = reinterpret_cast<const uint4*>(w + (ok[r] ? row : 0) * k);
    }
    float acc[RPW][NR];
#pragma unroll
    for (int r = 0; r < RPW; ++r)
#pragma unroll
      for (int n = 0; n < NR; ++n) acc[r][n] = 0.f;
    for (int64_t base = lane; base < nvec; base += 32 * kU) {
      V wv[RPW][kU];
      if (have_pre) {  // the block's first group, first iteration: loaded before the wait
#pragma unroll
        for (int u = 0; u < kU; ++u)
#pragma unroll
          for (int r = 0; r < RPW; ++r) wv[r][u].raw = pre[r][u];
        have_pre = false;
      } else {
#pragma unroll
        for (int u = 0; u < kU; ++u)
#pragma unroll
          for (int r = 0; r < RPW; ++r) {
            const int64_t c = base + 32 * u;
            wv[r][u].raw = (ok[r] && c < nvec) ? __ldcs(wr[r] + c) : make_uint4(0, 0, 0, 0);  // streamed once
          }
      }
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int64_t c = base + 32 * u;
        if (c < nvec) {
#pragma unroll
          for (int n = 0; n < NR; ++n) {
            V xv;
            xv.raw = xs[n * nvec + c];
#pragma unroll
            for (int r = 0; r < RPW; ++r)
#pragma unroll
              for (int e = 0; e < kN; ++e) acc[r][n] += to_f(wv[r][u].v[e]) * to_f(xv.v[e]);
          }
        }
      }
    }
    if (a.silu_out) {  // lane n writes (index, n) = silu(gate) * up
      const int64_t i = g * kWarps + warp;
#pragma unroll
      for (int n = 0; n < NR; ++n) {
        float v[RPW];
#pragma unroll
        for (int r = 0; r < RPW; ++r) {
          v[r] = acc[r][n];
          for (int o = 16; o > 0; o >>= 1) v[r] += __shfl_xor_sync(0xffffffffu, v[r], o);
        }
        if (ok[0] && lane == n) {
          const float bg = bias ? to_f(bias[i]) : 0.f, bu = bias ? to_f(bias[half + i]) : 0.f;
          out[n * half + i] = act_mul_round<T, true>(v[0] + bg, v[RPW - 1] + bu, a.act);
        }
      }
      continue;
    }
    // Epilogue: lane r * NR + n writes (row0 + r, n).
#pragma unroll
    for (int r = 0; r < RPW; ++r)
#pragma unroll
      for (int n = 0; n < NR; ++n) {
        float v = acc[r][n];
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (ok[r] && lane == r * NR + n) {
          const int64_t row = row0 + r, idx = n * m + row;
          T y = from_f<T>(v + (bias ? to_f(bias[row]) : 0.f));
          if (res) y = from_f<T>(to_f(res[idx]) + to_f(y));  // the add op's rounding
          out[idx] = y;
        }
      }
  }
}

template <typename T, int NR, int RPW>
void launch_shape(const GemvArgs& a, cudaStream_t stream) {
  auto* kernel = gemv_kernel<T, NR, RPW>;
  // Up to kMaxStageBytes of dynamic shared memory: set once per instantiation (before any capture
  // uses it: the first call of a shape runs eagerly).
  static const cudaError_t attr =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kMaxStageBytes));
  check(attr, "gemv: cudaFuncSetAttribute");
  int dev = 0, sms = 132;
  VIREO_CUDA_CHECK(cudaGetDevice(&dev));
  VIREO_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const size_t smem = static_cast<size_t>(NR) * a.k * sizeof(T);
  // Shared memory per SM (228 KiB on Hopper, 1 KiB reserved per block) may allow fewer than two.
  const int per_sm = static_cast<int>(std::clamp<size_t>((228 << 10) / (smem + 2048), 1, kBlocksPerSm));
  const int64_t groups = (a.m + kWarps * RPW - 1) / (kWarps * RPW);
  const unsigned grid = static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(groups, int64_t{sms} * per_sm)));
  launch_maybe_pdl(a.prefetch_bytes > 0, kernel, dim3(grid), dim3(kThreads), smem, stream, a);
}

// VIREO_GEMV_RESIDENT=0: never the register-resident kernel (A/B).
bool resident_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("VIREO_GEMV_RESIDENT");
    return e == nullptr || e[0] != '0';
  }();
  return on;
}

template <typename T, int NR>
void launch_rows(const GemvArgs& a, cudaStream_t stream) {
  int dev = 0, sms = 132;
  VIREO_CUDA_CHECK(cudaGetDevice(&dev));
  VIREO_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  if (resident_enabled() && launch_resident<T, NR>(a, sms, stream)) return;
  if (launch_stream<T, NR>(a, sms, stream)) return;
  if (a.silu_out) {  // the grid-stride kernel pairs gate and up rows as a warp's two rows
    launch_shape<T, NR, 2>(a, stream);
    return;
  }
  // Two rows per warp when a row is short (K < 256 vectors: fewer than 8 loads per lane), so each
  // lane still has 8 loads in flight.
  if (a.k / Vec<T>::kN < 32 * kLoads) launch_shape<T, NR, 2>(a, stream);
  else launch_shape<T, NR, 1>(a, stream);
}

template <typename T>
void launch_typed(const GemvArgs& a, int64_t n, cudaStream_t stream) {
  switch (n) {
    case 1: launch_rows<T, 1>(a, stream); break;
    case 2: launch_rows<T, 2>(a, stream); break;
    case 3: launch_rows<T, 3>(a, stream); break;
    default: launch_rows<T, 4>(a, stream); break;
  }
  check_launch("gemv");
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// The kernel arguments of a linear the GEMVs take, and its row count n; false when the shape or dtype
// is not covered.
bool gemv_args_of(const LinearParams& p, GemvArgs& a, int64_t& n) {
  if (p.w.ndim() != 2) return false;
  const bool norm = !p.input_norm.empty(), silu = p.silu_mul_input, res = !p.residual.empty();
  if (norm && silu) return false;  // rejected by the caller with an Error
  const int64_t m = p.w.dim(0), k = p.w.dim(1), in_k = silu ? 2 * k : k;
  if (k == 0 || m == 0 || p.x.dim(-1) != in_k || p.x.numel() % in_k != 0) return false;
  n = p.x.numel() / in_k;
  const DType t = p.x.dtype;
  if (n < 1 || n > 4 || k % 8 != 0 || (t != DType::kBF16 && t != DType::kF16)) return false;
  const bool silu_out = p.silu_mul_output;
  if (silu_out && (silu || res || m % 2 != 0)) return false;  // rejected by the caller with an Error
  if (p.w.dtype != t || p.out.dtype != t || p.out.numel() != n * (silu_out ? m / 2 : m)) return false;
  // Past ~64M weights (gate_up 4096x24576) cuBLASLt streamed slightly faster on the H200 (run 4); the
  // fused forms have no library equivalent, so they stay here.
  // The streaming kernel (gemv_stream.cuh) takes them when it applies.
  if (!norm && !silu && !res && !silu_out && m * k > (int64_t{64} << 20) && !stream_applies(m, k, 132)) return false;
  if (!p.bias.empty() && (p.bias.dtype != t || p.bias.numel() != m)) return false;
  if (res && (p.residual.dtype != t || p.residual.numel() != n * m)) return false;
  if (norm && (p.input_norm.numel() != k || !is_float_dtype(p.input_norm.dtype))) return false;
  if (!aligned16(p.x.data) || !aligned16(p.w.data)) return false;
  if (static_cast<size_t>(n * k) * dtype_size(t) > kMaxStageBytes) return false;
  a = GemvArgs{};
  a.x = p.x.data;
  a.w = p.w.data;
  a.bias = p.bias.empty() ? nullptr : p.bias.data;
  a.norm_w = norm ? p.input_norm.data : nullptr;
  a.norm_dt = norm ? p.input_norm.dtype : t;
  a.norm_vec = norm && p.input_norm.dtype == t && aligned16(p.input_norm.data);
  a.prologue = norm ? kNorm : silu ? kSiluMul : kPlain;
  a.residual = res ? p.residual.data : nullptr;
  a.out = p.out.data;
  a.silu_out = silu_out;
  a.act = p.act;
  a.k = k;
  a.m = m;
  a.eps = p.norm_eps;
  a.prefetch_bytes = m * k * static_cast<int64_t>(dtype_size(t)) <= pdl_max_bytes() ? kPrefetchBytes : 0;
  return true;
}

int num_sms_here() {
  int dev = 0, sms = 132;
  VIREO_CUDA_CHECK(cudaGetDevice(&dev));
  VIREO_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return sms;
}

}  // namespace

bool launch_gemv_small_n(const LinearParams& p, cudaStream_t stream) {
  GemvArgs a;
  int64_t n = 0;
  if (!gemv_args_of(p, a, n)) return false;
  if (p.x.dtype == DType::kBF16) launch_typed<__nv_bfloat16>(a, n, stream);
  else launch_typed<__half>(a, n, stream);
  return true;
}

int64_t gemv_row_stats_ranges() { return int64_t{num_sms_here()} * kWarps; }

bool launch_gemv_row_stats(const LinearParams& p, cudaStream_t stream) {
  GemvArgs a;
  int64_t n = 0;
  if (!gemv_args_of(p, a, n) || n != 1 || a.silu_out) return false;
  const Tensor& s = p.row_stats;
  const int sms = num_sms_here();
  if (s.dtype != DType::kF32 || s.numel() != int64_t{sms} * kWarps * 4 || !aligned16(s.data)) return false;
  // Only where the plain launch takes the streaming kernel too: asking for statistics never changes y.
  ResidentPlan rp;
  const bool resident = p.x.dtype == DType::kBF16 ? resident_plan<__nv_bfloat16>(a, sms, rp) : resident_plan<__half>(a, sms, rp);
  if (!stream_applies(a, sms) || (resident_enabled() && resident)) return false;
  a.row_stats = static_cast<float4*>(s.data);
  const bool done = p.x.dtype == DType::kBF16 ? launch_stream_rows<__nv_bfloat16>(a, sms, stream)
                                              : launch_stream_rows<__half>(a, sms, stream);
  if (done) check_launch("gemv row stats");
  return done;
}

}  // namespace vireo::cuda
