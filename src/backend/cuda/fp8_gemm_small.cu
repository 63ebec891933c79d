// fp8_gemm_small.h: the decode-batch W8A8 GEMM.
//
// Block: 256 threads = 2 warpgroups; 128 weight rows (64 a warpgroup: wgmma's M) x all n activation rows
// (wgmma's N, padded to kN = 64 or 128 with zero rows) over one K split. Both operands are K-major, as
// FP8 wgmma requires and as the tensors are stored: w [m, k], xq [n, k]. A stage holds 128 bytes of K (one
// 128B-swizzled panel: [128 rows][128 B] of w, [kN rows][128 B] of xq), 4 stages deep, filled by 16-byte
// cp.async from every thread; each stage is 4 k32 steps of m64nNk32 a warpgroup. The weights are never
// written by a kernel, so a block issues its first stages' weight copies before the programmatic-launch
// wait and overlaps them with the quantization kernel's tail.
// K split: as many splits as fill the SMs' waves best (blocks = m / 128 x splits); with one split the block
// writes out directly, else F32 partials [split, n, m] and fp8_small_reduce_kernel sums them.
// Bytes a block moves: 128 x K/splits of weights from HBM, kN x K/splits of activations (L2: each weight
// tile re-reads them), 4 x 128 x n of partials.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_types.cuh"
#include "backend/cuda/fp8_gemm_small.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/wgmma_common.cuh"
#include "backend/cuda/wgmma_fp8.cuh"

namespace vireo::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kBM = 128;      // weight rows a block
constexpr int kBK = 128;      // K bytes a stage
constexpr int kStages = 4;
constexpr int kMaxRows = 128;  // 256-row tiles measured slower than cuBLASLt everywhere (below)

struct SmallArgs {
  const uint8_t* w;      // [m, k] E4M3
  const float* w_scale;  // [m]
  const uint8_t* xq;     // [n, k] E4M3
  const float* x_scale;  // [n]
  const void* bias;      // [m] T or null
  const void* residual;  // [n, m] T or null (may alias out)
  void* out;             // [n, m] T
  float* partials;       // [splits, n, m] when splits > 1
  int n, m, k;
  int iters_per_split;   // K / kBK per split (the last split may have fewer)
};

template <typename T>
__device__ __forceinline__ T finish_value(const SmallArgs& a, float acc, int row, int col) {
  float v = acc * a.x_scale[row] * a.w_scale[col];
  if (a.bias) v += to_f(static_cast<const T*>(a.bias)[col]);
  if (a.residual) v = to_f(static_cast<const T*>(a.residual)[int64_t{row} * a.m + col]) + to_f(from_f<T>(v));
  return from_f<T>(v);
}

__device__ __forceinline__ void cp16(uint32_t smem_addr, const void* gmem, bool valid) {
  const int sz = valid ? 16 : 0;  // 0: zero-fill, nothing read
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr), "l"(gmem), "r"(sz));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

template <typename T, int kN>
__global__ void __launch_bounds__(kThreads, 1) fp8_small_gemm_kernel(const SmallArgs a) {
  constexpr uint32_t kW = kBM * kBK, kX = kN * kBK, kStage = kW + kX;
  extern __shared__ uint8_t smem_raw[];
  const uint32_t base = (static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw)) + 1023u) & ~1023u;
  const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31;
  const int m0 = blockIdx.x * kBM;
  const int it0 = blockIdx.y * a.iters_per_split;
  const int n_it = min(a.iters_per_split, a.k / kBK - it0);

  // Stage j's copies: w rows [m0, m0 + 128) and xq rows [0, kN) (zero past n), K bytes [kb, kb + 128).
  auto load_w = [&](int j) {
    const uint32_t sw = base + (j % kStages) * kStage;
    const uint8_t* src = a.w + int64_t{m0} * a.k + int64_t{it0 + j} * kBK;
#pragma unroll
    for (int i = tid; i < kBM * 8; i += kThreads) cp16(sw + swz128(i >> 3, i & 7), src + int64_t{i >> 3} * a.k + (i & 7) * 16, true);
  };
  auto load_x = [&](int j) {
    const uint32_t sx = base + (j % kStages) * kStage + kW;
    const uint8_t* src = a.xq + int64_t{it0 + j} * kBK;
#pragma unroll
    for (int i = tid; i < kN * 8; i += kThreads) {
      const int r = i >> 3;
      const bool ok = r < a.n;
      cp16(sx + swz128(r, i & 7), src + int64_t{ok ? r : 0} * a.k + (i & 7) * 16, ok);
    }
  };
  // The weights before the wait (no kernel writes them); the activations after it.
  for (int s = 0; s < kStages - 1; ++s)
    if (s < n_it) load_w(s);
  pdl_wait();
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < n_it) load_x(s);
    cp_commit();
  }

  float d[kN / 8][4];
#pragma unroll
  for (int i = 0; i < kN / 8; ++i) d[i][0] = d[i][1] = d[i][2] = d[i][3] = 0.f;
  for (int j = 0; j < n_it; ++j) {
    cp_wait<kStages - 2>();  // stage j landed (this thread's copies)
    fence_proxy_async_smem();
    __syncthreads();          // ... everyone's; and stage j - 1's wgmma are done in both warpgroups
    if (j + kStages - 1 < n_it) {
      load_w(j + kStages - 1);
      load_x(j + kStages - 1);
    }
    cp_commit();
    const uint32_t sw = base + (j % kStages) * kStage + wg * 64 * kBK, sx = base + (j % kStages) * kStage + kW;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBK / 32; ++kk)
      wgmma_fp8_ss<kN>(d, wgmma_desc(sw + 32 * kk, 16, 1024), wgmma_desc(sx + 32 * kk, 16, 1024), 1);
    wgmma_commit();
    wgmma_wait<0>();
    reg_fence(d);
  }
  pdl_trigger();

  // d[i][e]: weight row (output column) m0 + 64 wg + 16 warp + lane / 4 (+ 8 for e >= 2), activation row
  // 8 i + 2 (lane % 4) (+ 1 for odd e).
  const int col0 = m0 + wg * 64 + warp * 16 + (lane >> 2);
  const int row0 = 2 * (lane & 3);
  if (gridDim.y == 1) {
    T* out = static_cast<T*>(a.out);
#pragma unroll
    for (int i = 0; i < kN / 8; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = 8 * i + row0 + (e & 1), col = col0 + 8 * (e >> 1);
        if (row < a.n) out[int64_t{row} * a.m + col] = finish_value<T>(a, d[i][e], row, col);
      }
    return;
  }
  float* part = a.partials + int64_t{blockIdx.y} * a.n * a.m;
#pragma unroll
  for (int i = 0; i < kN / 8; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = 8 * i + row0 + (e & 1), col = col0 + 8 * (e >> 1);
      if (row < a.n) part[int64_t{row} * a.m + col] = d[i][e];
    }
}

// out = finish(sum of the splits' partials), 4 columns a thread.
template <typename T>
__global__ void fp8_small_reduce_kernel(const SmallArgs a, int splits) {
  pdl_wait();
  const int64_t total = int64_t{a.n} * a.m;
  const int64_t split_stride = total;
  for (int64_t i = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) * 4; i < total;
       i += int64_t{gridDim.x} * blockDim.x * 4) {
    float4 s = *reinterpret_cast<const float4*>(a.partials + i);
    for (int p = 1; p < splits; ++p) {
      const float4 v = *reinterpret_cast<const float4*>(a.partials + p * split_stride + i);
      s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w;
    }
    const int row = static_cast<int>(i / a.m), col = static_cast<int>(i % a.m);
    T* out = static_cast<T*>(a.out) + i;
    const float v[4] = {s.x, s.y, s.z, s.w};
#pragma unroll
    for (int e = 0; e < 4; ++e) out[e] = finish_value<T>(a, v[e], row, col + e);
  }
  pdl_trigger();
}

int num_sms() {
  int dev = 0, sms = 0;
  VIREO_CUDA_CHECK(cudaGetDevice(&dev));
  VIREO_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return sms;
}

// Splits of K: the fewest whose blocks fill their waves to >= 85% (else the best fill), at least 4 stages
// a split.
int choose_splits(int64_t m, int64_t k) {
  const int64_t tiles = m / kBM, iters = k / kBK, sms = num_sms();
  const int max_splits = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(16, iters / 4)));
  int best = 1;
  double best_fill = 0;
  for (int s = 1; s <= max_splits; ++s) {
    const int64_t blocks = tiles * s, waves = (blocks + sms - 1) / sms;
    const double fill = static_cast<double>(blocks) / static_cast<double>(waves * sms);
    if (fill >= 0.85) return s;
    if (fill > best_fill + 1e-9) best = s, best_fill = fill;
  }
  return best;
}

// The splits as launched: iters_per_split rounded up, so every split is non-empty.
int effective_splits(int64_t m, int64_t k, int* iters_per_split) {
  const int iters = static_cast<int>(k / kBK), splits = choose_splits(m, k);
  const int per = (iters + splits - 1) / splits;
  if (iters_per_split) *iters_per_split = per;
  return (iters + per - 1) / per;
}

bool small_gemm_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("VIREO_FP8_SMALL_GEMM");
    return !(e && e[0] == '0');
  }();
  return on;
}

template <typename T, int kN>
void launch_typed(const SmallArgs& a, int splits, cudaStream_t stream) {
  constexpr size_t smem = kStages * (kBM * kBK + kN * kBK) + 1024;
  static const bool attr = [] {
    VIREO_CUDA_CHECK(cudaFuncSetAttribute(fp8_small_gemm_kernel<T, kN>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(smem)));
    return true;
  }();
  (void)attr;
  launch_pdl(fp8_small_gemm_kernel<T, kN>, dim3(static_cast<unsigned>(a.m / kBM), static_cast<unsigned>(splits)),
             dim3(kThreads), smem, stream, a);
  check_launch("fp8 small gemm");
  if (splits > 1) {
    const int64_t quads = int64_t{a.n} * a.m / 4;
    const int blocks = static_cast<int>(std::min<int64_t>((quads + 255) / 256, int64_t{num_sms()} * 8));
    launch_pdl(fp8_small_reduce_kernel<T>, dim3(static_cast<unsigned>(blocks)), dim3(256), 0, stream, a, splits);
    check_launch("fp8 small gemm reduce");
  }
}

template <typename T>
void launch_rows(const SmallArgs& a, int splits, cudaStream_t stream) {
  if (a.n <= 64) launch_typed<T, 64>(a, splits, stream);
  else launch_typed<T, 128>(a, splits, stream);
}

}  // namespace

bool fp8_small_gemm_ok(int64_t n, int64_t m, int64_t k) {
  return small_gemm_enabled() && n >= 1 && n <= kMaxRows && m > 0 && k > 0 && m % kBM == 0 && k % kBK == 0 &&
         m <= (int64_t{1} << 30) && k <= (int64_t{1} << 30);
}

// Fp8Bench.E_SmallGemm (H100, session 44; cuBLASLt vs this kernel, us): o_proj 4096 x 4096 at 16 / 64 / 128 /
// 256 rows 15.0 vs 10.5, 15.1 vs 11.7, 15.1 vs 14.7, 15.2 vs 22.9; down 12288 -> 4096 35.0 vs 23.4, 34.7 vs
// 25.7, 34.0 vs 30.0, 34.4 vs 41.5; qkv (6144 rows) 15.6 vs 13.7 at 16 rows, slower from 64; gate_up (24576)
// slower at every size. The kernel wins where cuBLASLt's grid is short of the SMs (few weight-row tiles) and
// the activation rows are few; with more rows its activation re-reads (each tile reads all of them) and split
// partials outgrow the weights, and its one-warpgroup-pair pipeline leaves the loads and the wgmma in turn.
bool fp8_small_gemm_preferred(int64_t n, int64_t m, int64_t k) {
  if (!fp8_small_gemm_ok(n, m, k)) return false;
  const int64_t tiles = m / kBM;
  return (n <= 128 && tiles * 4 <= num_sms()) || (n <= 16 && tiles * 2 <= num_sms());
}

size_t fp8_small_gemm_scratch(int64_t n, int64_t m, int64_t k) {
  const int splits = effective_splits(m, k, nullptr);
  return splits > 1 ? static_cast<size_t>(splits) * static_cast<size_t>(n * m) * sizeof(float) : 0;
}

void launch_fp8_small_gemm(const CublasLtGemm::Fp8Args& g, float* partials, cudaStream_t stream) {
  if (!fp8_small_gemm_ok(g.n, g.m, g.k)) throw Error("fp8 small gemm: shape not taken");
  SmallArgs a{g.w, g.w_scale, g.xq, g.x_scale, g.bias, g.residual, g.out, partials,
              static_cast<int>(g.n), static_cast<int>(g.m), static_cast<int>(g.k), 0};
  const int splits = effective_splits(g.m, g.k, &a.iters_per_split);
  if (splits > 1 && partials == nullptr) throw Error("fp8 small gemm: split K needs partials scratch");
  if (g.out_dtype == DType::kBF16) launch_rows<__nv_bfloat16>(a, splits, stream);
  else if (g.out_dtype == DType::kF16) launch_rows<__half>(a, splits, stream);
  else throw Error("fp8 small gemm: out must be bf16 or f16");
}

}  // namespace vireo::cuda
