// fp8_gemm_ws.h: the warp-specialised W8A8 GEMM.
//
// The cooperative schedule. Persistent: one block an SM walks output tiles of 128 activation rows x 256 weight
// rows in fp8_gemm_tile's grouped order. Block: 384 threads.
//   WG 0, the producer (one thread): per K stage of 128 bytes, one TMA box of the activation rows
//     (128 x 128 B) and one of the weight rows (256 x 128 B) into a 4-deep ring of 48 KiB stages,
//     128B-swizzled (swz128's layout), counted on the stage's "full" barrier; it waits on the stage's
//     "empty" barrier before refilling it, so it runs up to 4 stages ahead, across tiles too (the next
//     tile's first stages land while the consumers write the last tile out).
//   WG 1, 2, the consumers: 64 activation rows each x all 256 weight rows: per stage 4 k32 steps of two
//     m64n128k32 E4M3 wgmma (128 F32 accumulators a thread); the stage is released once the next stage's
//     wgmma are issued (wgmma_wait<1>). After a tile's last stage: scales (x_scale of the row, w_scale of
//     the column: staged in shared memory at the tile's start), bias, residual, one rounding, bf16x2 / half2
//     stores straight from registers.
// Bytes a tile reads (L2): 384 x K (activations re-read by every column tile, weights by every row tile);
// FLOPs 2 x 128 x 256 x K: 170 FLOP a byte, ~48 bytes a clock an SM at the FP8 peak.
#include <algorithm>

#include "backend/cuda/cuda_common.h"
#include "backend/cuda/fp8_gemm_plan.h"
#include "backend/cuda/fp8_gemm_tile.cuh"
#include "backend/cuda/fp8_gemm_ws.h"
#include "backend/cuda/kv_tensor_map.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/tma_barrier.cuh"
#include "backend/cuda/wgmma_common.cuh"
#include "backend/cuda/wgmma_fp8.cuh"

namespace vireo::cuda {
namespace {

constexpr int kThreads = 384;
constexpr int kBM = 128;  // activation rows a tile (2 consumer warpgroups x 64: wgmma's M)
constexpr int kBN = 256;  // weight rows (output columns) a tile (2 x 128: wgmma's N)
constexpr int kBK = 128;  // K bytes a stage (fp8_stage_mma's 4 k32 steps)
constexpr int kStages = 4;
constexpr uint32_t kABytes = kBM * kBK, kBBytes = kBN * kBK, kStageBytes = kABytes + kBBytes;
constexpr uint32_t kBarOffset = kStages * kStageBytes;  // full [kStages], empty [kStages]
// Per consumer warpgroup: the tile's 256 column scales and 256 biases (F32), staged at the tile's start so the
// epilogue reads shared memory, not 64 dependent global loads a thread (ncu, session 54: the epilogue's
// multiplies waiting on those loads took a third of the first version's stall samples).
constexpr uint32_t kColOffset = kBarOffset + 16 * kStages;
constexpr uint32_t kColBytes = 2 * kBN * 4;                           // scales, then biases
constexpr size_t kSmemBytes = kColOffset + 2 * kColBytes + 1024;      // + alignment slack
constexpr int kProdRegs = 40, kMathRegs = 232;                    // 128 x 40 + 256 x 232 <= 65536

using GemmArgs = Fp8GemmArgs;
using GemmMaps = Fp8GemmMaps;

__device__ __forceinline__ void produce(const GemmArgs& a, const GemmMaps& maps, uint32_t base) {
  const int k_iters = a.k / kBK;
  int it = 0;
  for (int t = blockIdx.x; t < a.num_tiles; t += gridDim.x) {
    int tm, tn;
    fp8_gemm_tile(a, t, tm, tn);
    for (int kk = 0; kk < k_iters; ++kk, ++it) {
      const int s = it % kStages;
      const uint32_t full = base + kBarOffset + 8 * s, empty = full + 8 * kStages;
      if (it >= kStages) ws_bar_wait(empty, ((it / kStages) & 1) ^ 1);
      const uint32_t stage = base + s * kStageBytes;
      ws_bar_arrive_expect_tx(full, kStageBytes);
      tma_load_2d(stage, &maps.x, kk * kBK, tm * kBM, full);
      tma_load_2d(stage + kABytes, &maps.w, kk * kBK, tn * kBN, full);
    }
  }
}

template <typename T>
__device__ __forceinline__ void consume(const GemmArgs& a, uint32_t base, float* cols, int cw) {
  const int k_iters = a.k / kBK;
  const int wt = threadIdx.x & 127, lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3;
  int it = 0;
  for (int t = blockIdx.x; t < a.num_tiles; t += gridDim.x) {
    int tm, tn;
    fp8_gemm_tile(a, t, tm, tn);
    const int row0 = tm * kBM + cw * 64 + warp * 16 + (lane >> 2);
    // Stage the tile's column scales and biases (2 a thread) once the last tile's epilogue has read them,
    // and fetch this thread's two row scales; both land during the mainloop.
    ws_named_sync(1 + cw, 128);
    {
      const int c = 2 * wt, col = tn * kBN + c;
      const float2 ws = *reinterpret_cast<const float2*>(a.w_scale + col);
      float2 b = make_float2(0.f, 0.f);
      if (a.bias) b = make_float2(to_f(static_cast<const T*>(a.bias)[col]), to_f(static_cast<const T*>(a.bias)[col + 1]));
      *reinterpret_cast<float2*>(cols + c) = ws;
      *reinterpret_cast<float2*>(cols + kBN + c) = b;
    }
    float xs[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) xs[h] = row0 + 8 * h < a.n ? a.x_scale[row0 + 8 * h] : 0.f;
    float d0[16][4], d1[16][4];
#pragma unroll
    for (int i = 0; i < 16; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) d0[i][e] = d1[i][e] = 0.f;
    uint32_t prev_empty = 0;
    for (int kk = 0; kk < k_iters; ++kk, ++it) {
      const int s = it % kStages;
      const uint32_t full = base + kBarOffset + 8 * s;
      ws_bar_wait(full, (it / kStages) & 1);
      const uint32_t stage = base + s * kStageBytes;
      const uint64_t da = wgmma_desc(stage + cw * 64 * kBK, 16, 1024);
      fp8_stage_mma(d0, d1, da, wgmma_desc(stage + kABytes, 16, 1024), da, wgmma_desc(stage + kABytes + 128 * kBK, 16, 1024));
      if (kk > 0) {
        wgmma_wait<1>();  // the previous stage's wgmma are done: its buffers may be refilled
        ws_bar_arrive(prev_empty);
      }
      prev_empty = full + 8 * kStages;
    }
    wgmma_wait<0>();
    ws_bar_arrive(prev_empty);
    reg_fence(d0);
    reg_fence(d1);
    ws_named_sync(1 + cw, 128);  // the staged columns are written
    const int c0 = 2 * (lane & 3), col0 = tn * kBN + c0;
    fp8_store_block<T, kBN>(a, d0, row0, col0, cols, c0, xs);
    fp8_store_block<T, kBN>(a, d1, row0, col0 + 128, cols, c0 + 128, xs);
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads, 1) fp8_gemm_ws_kernel(const GemmArgs a, const __grid_constant__ GemmMaps maps) {
  extern __shared__ __align__(1024) unsigned char gemm_smem_raw[];
  const uint32_t base = (static_cast<uint32_t>(__cvta_generic_to_shared(gemm_smem_raw)) + 1023u) & ~1023u;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      ws_bar_init(base + kBarOffset + 8 * s, 1);                  // full: the producer's arrival + TMA bytes
      ws_bar_init(base + kBarOffset + 8 * (kStages + s), 256);    // empty: every consumer thread
    }
  }
  __syncthreads();
  pdl_enter();  // before the first read of xq / the scales and the first write of out
  if (threadIdx.x < 128) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProdRegs));
    if (threadIdx.x == 0) produce(a, maps, base);
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kMathRegs));
    const int cw = (threadIdx.x >> 7) - 1;
    float* cols = reinterpret_cast<float*>(gemm_smem_raw + (base - static_cast<uint32_t>(__cvta_generic_to_shared(gemm_smem_raw))) +
                                           kColOffset + cw * kColBytes);
    consume<T>(a, base, cols, cw);
  }
}

template <typename T>
void launch_typed(const GemmArgs& a, const GemmMaps& maps, cudaStream_t stream) {
  static const bool attr = [] {
    VIREO_CUDA_CHECK(cudaFuncSetAttribute(fp8_gemm_ws_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(kSmemBytes)));
    return true;
  }();
  (void)attr;
  const int blocks = std::min(a.num_tiles, fp8_gemm_sm_count());
  launch_pdl(fp8_gemm_ws_kernel<T>, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), kSmemBytes, stream, a, maps);
  check_launch("fp8 gemm (warp-specialised)");
}

}  // namespace

bool fp8_gemm_ws_ok(int64_t n, int64_t m, int64_t k) {
  return n >= 1 && m > 0 && k > 0 && m % kBN == 0 && k % kBK == 0 && n < (int64_t{1} << 30) && m < (int64_t{1} << 30) &&
         k < (int64_t{1} << 30) && n * m < (int64_t{1} << 40);
}

void launch_fp8_gemm_ws(const CublasLtGemm::Fp8Args& g, cudaStream_t stream) {
  if (!fp8_gemm_ws_ok(g.n, g.m, g.k)) throw Error("fp8 gemm (ws): shape not taken");
  GemmMaps maps{};
  if (!u8_rows_tensor_map(g.xq, g.n, g.k, kBM, &maps.x) || !fp8_weight_tensor_map(g.w, g.m, g.k, kBN, &maps.w))
    throw Error("fp8 gemm (ws): the driver refused a tensor map");
  GemmArgs a{g.w_scale, g.x_scale, g.bias, g.residual, g.out, static_cast<int>(g.n), static_cast<int>(g.m),
             static_cast<int>(g.k), 0, 0, 0, 0};
  a.tiles_m = static_cast<int>((g.n + kBM - 1) / kBM);
  a.tiles_n = static_cast<int>(g.m / kBN);
  a.num_tiles = a.tiles_m * a.tiles_n;
  a.group_m = fp8_gemm_group_rows(a.tiles_m, kBM, g.k);
  if (g.out_dtype == DType::kBF16) launch_typed<__nv_bfloat16>(a, maps, stream);
  else if (g.out_dtype == DType::kF16) launch_typed<__half>(a, maps, stream);
  else throw Error("fp8 gemm (ws): out must be bf16 or f16");
}

}  // namespace vireo::cuda
