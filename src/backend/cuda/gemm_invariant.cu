// Batch-invariant linear: out[N, M] = x[N, K] @ w[M, K]^T + bias, each output element one fp32 chain
// over k ascending (gemm_invariant_plan.h says why no row depends on the others), rounded once to the
// activation dtype after the bias add. No split-K, no library heuristics, one launch.
//   mma (bf16/f16, K % 8 == 0): blocks of BM x 64 outputs, 4 warps, 32-wide k tiles gathered with
//     cp.async three stages deep into padded shared memory, ldmatrix + mma.sync m16n8k16 (zero-filled
//     past N, M and K; zero products leave a sum unchanged).
//   SIMT (F32 activations, or anything the mma kernel does not take): 64 x 64 blocks, 256 threads of
//     4 x 4 outputs, 16-wide k tiles through shared memory, one fmaf per k.
#include "backend/cuda/attention_mma_common.cuh"
#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_types.cuh"
#include "backend/cuda/gemm_invariant_plan.h"

namespace vireo::cuda {
namespace {

constexpr int kGemmCols = 64;        // output columns (rows of w) per block
constexpr int kGemmK = 32;           // k per pipeline stage
constexpr int kGemmLd = kGemmK + 8;  // smem row stride (elements): 80 bytes, ldmatrix rows conflict-free
constexpr int kGemmStages = 3;
constexpr int kGemmThreads = 128;

struct GemmArgs {
  const void* x;
  const void* w;
  const void* bias;  // nullptr: none
  DType bias_dtype;
  void* out;
  int64_t n, m, k;
};

__device__ __forceinline__ float load_bias(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::kF32: return static_cast<const float*>(p)[i];
    case DType::kF16: return __half2float(static_cast<const __half*>(p)[i]);
    default: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  }
}

// BM = 16: 4 warps side by side, each 16 rows x 16 columns; BM = 64: 2 x 2 warps of 32 x 32.
template <typename T, int BM>
__global__ void __launch_bounds__(kGemmThreads) gemm_invariant_mma_kernel(GemmArgs a) {
  constexpr int kMT = BM == 16 ? 1 : 2;        // 16-row m-tiles per warp
  constexpr int kWarpsM = BM / (16 * kMT);     // 1 or 2
  constexpr int kWarpsN = 4 / kWarpsM;         // 4 or 2
  constexpr int kWN = kGemmCols / kWarpsN;     // 16 or 32 columns per warp
  constexpr int kNT = kWN / 8;                 // 2 or 4 n-tiles (even: one ldmatrix x4 feeds two)
  constexpr int kChunks = kGemmK / 8;          // 16-byte chunks per smem row
  __shared__ __align__(16) T xs[kGemmStages][BM][kGemmLd];
  __shared__ __align__(16) T ws[kGemmStages][kGemmCols][kGemmLd];

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
  const int wm = warp / kWarpsN, wn = warp % kWarpsN;
  const int64_t n0 = static_cast<int64_t>(blockIdx.y) * BM, m0 = static_cast<int64_t>(blockIdx.x) * kGemmCols;
  const T* x = static_cast<const T*>(a.x);
  const T* w = static_cast<const T*>(a.w);
  const int ktiles = static_cast<int>((a.k + kGemmK - 1) / kGemmK);
  auto load_tile = [&](int kt, int st) {
    const int64_t k0 = static_cast<int64_t>(kt) * kGemmK;
    for (int c = threadIdx.x; c < BM * kChunks; c += kGemmThreads) {
      const int r = c / kChunks, col = (c % kChunks) * 8;
      const bool ok = n0 + r < a.n && k0 + col < a.k;  // K % 8 == 0: a chunk is wholly in or out
      cp_async16(&xs[st][r][col], ok ? x + (n0 + r) * a.k + k0 + col : x, ok);
    }
    for (int c = threadIdx.x; c < kGemmCols * kChunks; c += kGemmThreads) {
      const int r = c / kChunks, col = (c % kChunks) * 8;
      const bool ok = m0 + r < a.m && k0 + col < a.k;
      cp_async16(&ws[st][r][col], ok ? w + (m0 + r) * a.k + k0 + col : w, ok);
    }
  };

  pdl_enter();  // x is the previous kernel's output
  float acc[kMT][kNT][4];
#pragma unroll
  for (int i = 0; i < kMT; ++i)
#pragma unroll
    for (int j = 0; j < kNT; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.f;
#pragma unroll
  for (int st = 0; st < kGemmStages - 1; ++st) {
    if (st < ktiles) load_tile(st, st);
    cp_async_commit();
  }
  for (int kt = 0; kt < ktiles; ++kt) {
    cp_async_wait<kGemmStages - 2>();  // tile kt landed (this thread's copies) ...
    __syncthreads();                   // ... everyone's, and nobody still reads the stage refilled next
    if (kt + kGemmStages - 1 < ktiles) load_tile(kt + kGemmStages - 1, (kt + kGemmStages - 1) % kGemmStages);
    cp_async_commit();
    const int st = kt % kGemmStages;
#pragma unroll
    for (int kk = 0; kk < kGemmK; kk += 16) {
      unsigned af[kMT][4];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
        ldmatrix_x4(af[mt], &xs[st][wm * 16 * kMT + mt * 16 + lane % 16][kk + (lane / 16) * 8]);
#pragma unroll
      for (int nt = 0; nt < kNT; nt += 2) {
        unsigned b[4];
        ldmatrix_x4(b, &ws[st][wn * kWN + nt * 8 + lane % 8 + (lane / 16) * 8][kk + ((lane / 8) % 2) * 8]);
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          mma16816<T>(acc[mt][nt], af[mt], b[0], b[1]);
          mma16816<T>(acc[mt][nt + 1], af[mt], b[2], b[3]);
        }
      }
    }
  }
  cp_async_wait<0>();
  // Accumulator layout: c0, c1 at (row g, columns 2t, 2t+1); c2, c3 at row g + 8.
  T* out = static_cast<T*>(a.out);
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t row = n0 + wm * 16 * kMT + mt * 16 + g + (e / 2) * 8;
        const int64_t col = m0 + wn * kWN + nt * 8 + 2 * tq + (e % 2);
        if (row >= a.n || col >= a.m) continue;
        float v = acc[mt][nt][e];
        if (a.bias) v += load_bias(a.bias, a.bias_dtype, col);
        out[row * a.m + col] = from_f<T>(v);
      }
}

// 64 x 64 outputs per block; thread (ty, tx) owns rows ty + 16 i and columns tx + 16 j (i, j < 4).
template <typename T>
__global__ void __launch_bounds__(256) gemm_invariant_simt_kernel(GemmArgs a) {
  constexpr int kTile = 64, kK = 16;
  __shared__ float xs[kK][kTile + 1];
  __shared__ float ws[kK][kTile + 1];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t n0 = static_cast<int64_t>(blockIdx.y) * kTile, m0 = static_cast<int64_t>(blockIdx.x) * kTile;
  const T* x = static_cast<const T*>(a.x);
  const T* w = static_cast<const T*>(a.w);
  pdl_enter();
  float acc[4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;
  for (int64_t k0 = 0; k0 < a.k; k0 += kK) {
    for (int c = threadIdx.x; c < kTile * kK; c += 256) {
      const int r = c / kK, kk = c % kK;
      const bool kin = k0 + kk < a.k;
      xs[kk][r] = kin && n0 + r < a.n ? to_f(x[(n0 + r) * a.k + k0 + kk]) : 0.f;
      ws[kk][r] = kin && m0 + r < a.m ? to_f(w[(m0 + r) * a.k + k0 + kk]) : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kK; ++kk) {
      float xv[4], wv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) xv[i] = xs[kk][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < 4; ++j) wv[j] = ws[kk][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(xv[i], wv[j], acc[i][j]);
    }
    __syncthreads();
  }
  T* out = static_cast<T*>(a.out);
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t row = n0 + ty + 16 * i, col = m0 + tx + 16 * j;
      if (row >= a.n || col >= a.m) continue;
      float v = acc[i][j];
      if (a.bias) v += load_bias(a.bias, a.bias_dtype, col);
      out[row * a.m + col] = from_f<T>(v);
    }
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

}  // namespace

void launch_gemm_invariant(const LinearParams& p, cudaStream_t stream) {
  if (p.w.ndim() != 2) throw Error("linear: w must be [M, K]");
  if (!p.input_norm.empty() || p.silu_mul_input || !p.residual.empty())
    throw Error("linear: launch_gemm_invariant takes the plain form; fused forms go through run_linear");
  const int64_t m = p.w.dim(0), k = p.w.dim(1);
  if (k == 0 || p.x.dim(-1) != k)
    throw Error("linear: x last dim " + std::to_string(p.x.dim(-1)) + " != K " + std::to_string(k));
  const int64_t n = p.x.numel() / k;
  if (p.out.numel() != n * m) throw Error("linear: out must be [N, M]");
  if (p.x.dtype != p.w.dtype || p.out.dtype != p.x.dtype)
    throw Error("linear: x, w and out must share one dtype (upload weights in the activation dtype)");
  if (!p.bias.empty() && (p.bias.numel() != m || !is_float_dtype(p.bias.dtype))) throw Error("linear: bias must be [M]");
  if (n == 0 || m == 0) return;
  const InvariantGemmPlan plan =
      plan_invariant_gemm(n, m, k, p.x.dtype, aligned16(p.x.data) && aligned16(p.w.data));
  if (plan.grid_y > 65535) throw Error("linear: too many rows for the batch-invariant GEMM");
  GemmArgs a{p.x.data, p.w.data, p.bias.empty() ? nullptr : p.bias.data, p.bias.dtype, p.out.data, n, m, k};
  const dim3 grid(static_cast<unsigned>(plan.grid_x), static_cast<unsigned>(plan.grid_y));
  dispatch_float(p.x.dtype, "linear", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float>) {
      launch_pdl(gemm_invariant_simt_kernel<T>, grid, dim3(256), 0, stream, a);
    } else {
      switch (plan.kernel) {
        case InvariantGemmKernel::kMma16:
          launch_pdl(gemm_invariant_mma_kernel<T, 16>, grid, dim3(kGemmThreads), 0, stream, a);
          break;
        case InvariantGemmKernel::kMma64:
          launch_pdl(gemm_invariant_mma_kernel<T, 64>, grid, dim3(kGemmThreads), 0, stream, a);
          break;
        case InvariantGemmKernel::kSimt:
          launch_pdl(gemm_invariant_simt_kernel<T>, grid, dim3(256), 0, stream, a);
          break;
      }
    }
  });
  check_launch("gemm_invariant");
}

}  // namespace vireo::cuda
