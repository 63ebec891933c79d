// fp8_gemm_ws.h: the ping-pong schedule of the warp-specialised W8A8 GEMM.
//
// Persistent: one block an SM walks output tiles of 128 activation rows x 128 weight rows in fp8_gemm_tile's
// grouped order; the block's j-th tile belongs to consumer warpgroup j % 2. Block: 384 threads.
//   WG 0, the producer (one thread): per tile, per K stage of 128 bytes, one TMA box of the activation rows
//     and one of the weight rows (128 x 128 B each) into a 6-deep ring of 32 KiB stages (128B-swizzled),
//     counted on the stage's "full" barrier, tiles in the block's order; it refills a stage once its
//     "empty" barrier says the consumer is done with it.
//   WG 1, 2, the consumers, taking turns: a warpgroup's mainloop (per stage 4 k32 steps of two m64n128k32
//     E4M3 wgmma, rows 0-63 and 64-127 against the same weight rows; 128 F32 accumulators a thread) starts
//     once the other's has issued its last wgmma (named barriers 3 and 4), so one mainloop at a time keeps
//     the tensor cores busy while the other warpgroup scales, rounds and stores its finished tile.
//     The turn-taking also keeps each warpgroup's "full" waits at most one phase ahead of the barrier (a
//     warpgroup skips the other's tiles in the ring; parity waits alias two phases ahead).
// Bytes a tile reads (L2): 256 x K; FLOPs 2 x 128 x 128 x K: 128 FLOP a byte.
// With kCluster = 2 (VIREO_FP8_GEMM_WS=3) two blocks of a cluster take row tiles 2p and 2p + 1 of the same
// column tile at once: each producer loads its own activation box and half of the weight box, multicast to
// both blocks (192 bytes of L2 reads per 32 KiB of FLOPs instead of 256, as cuBLASLt's 1 x 2 clusters); a
// stage is refilled once the consumers of both blocks released it (their "empty" arrivals go to both).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

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
constexpr int kBM = 128;  // activation rows a tile (two m64 wgmma)
constexpr int kBN = 128;  // weight rows (output columns) a tile (wgmma's N)
constexpr int kBK = 128;  // K bytes a stage (fp8_stage_mma's 4 k32 steps)
constexpr int kStages = 6;
constexpr uint32_t kABytes = kBM * kBK, kBBytes = kBN * kBK, kStageBytes = kABytes + kBBytes;
constexpr uint32_t kBarOffset = kStages * kStageBytes;  // full [kStages], empty [kStages]
// Per consumer warpgroup: its tile's 128 column scales and 128 biases (F32), staged at the tile's start.
constexpr uint32_t kColOffset = kBarOffset + 16 * kStages;
constexpr uint32_t kColBytes = 2 * kBN * 4;
constexpr size_t kSmemBytes = kColOffset + 2 * kColBytes + 1024;  // + alignment slack
constexpr int kProdRegs = 40, kMathRegs = 232;                    // 128 x 40 + 256 x 232 <= 65536
// Named barriers: 1 + cw, a warpgroup's staged columns; 3 + cw, "warpgroup cw has issued its mainloop".
constexpr int kColsBar = 1, kTurnBar = 3;

// This block's tile sequence: tile t of the walk (cluster tiles: pairs of row tiles, rank picks the row tile).
template <int kCluster>
struct Walk {
  int first, step;
  __device__ Walk() {
    if constexpr (kCluster == 1) first = blockIdx.x, step = gridDim.x;
    else first = static_cast<int>(cluster_id_x()), step = static_cast<int>(num_clusters_x());
  }
  __device__ void tile(const Fp8GemmArgs& a, int t, int& tm, int& tn) const {
    fp8_gemm_tile(a, t, tm, tn);
    if constexpr (kCluster > 1) tm = tm * kCluster + static_cast<int>(cluster_rank());
  }
};

template <int kCluster>
__device__ __forceinline__ void produce(const Fp8GemmArgs& a, const Fp8GemmMaps& maps, uint32_t base) {
  const int k_iters = a.k / kBK;
  const Walk<kCluster> walk;
  const uint32_t rank = kCluster > 1 ? cluster_rank() : 0;
  const int last_tm = (a.n - 1) / kBM;
  int it = 0;
  for (int t = walk.first; t < a.num_tiles; t += walk.step) {
    int tm, tn;
    walk.tile(a, t, tm, tn);
    for (int kk = 0; kk < k_iters; ++kk, ++it) {
      const int s = it % kStages;
      const uint32_t full = base + kBarOffset + 8 * s, empty = full + 8 * kStages;
      if (it >= kStages) ws_bar_wait(empty, ((it / kStages) & 1) ^ 1);
      const uint32_t stage = base + s * kStageBytes;
      ws_bar_arrive_expect_tx(full, kStageBytes);
      // A row tile past n (the second of a pair) loads the last real one instead: counted bytes all the same,
      // its rows never stored.
      tma_load_2d(stage, &maps.x, kk * kBK, min(tm, last_tm) * kBM, full);
      if constexpr (kCluster == 1) {
        tma_load_2d(stage + kABytes, &maps.w, kk * kBK, tn * kBN, full);
      } else {  // this block's share of the weight rows, into every block of the cluster
        constexpr uint32_t kShare = kBN / kCluster;
        tma_load_2d_multicast(stage + kABytes + rank * kShare * kBK, &maps.w, kk * kBK, tn * kBN + rank * kShare, full,
                              (1u << kCluster) - 1);
      }
    }
  }
}

// A stage's release: lane 0 of each consumer warp arrives on the stage's "empty" barrier in every block of
// the cluster (each warp's wgmma are done reading it).
template <int kCluster>
__device__ __forceinline__ void release(uint32_t empty, int lane) {
  if (lane != 0) return;
  if constexpr (kCluster == 1) ws_bar_arrive(empty);
  else
    for (uint32_t c = 0; c < kCluster; ++c) ws_bar_arrive_cluster(empty, c);
}

template <typename T, int kCluster>
__device__ __forceinline__ void consume(const Fp8GemmArgs& a, uint32_t base, float* cols, int cw) {
  const int k_iters = a.k / kBK;
  const int wt = threadIdx.x & 127, lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3;
  const Walk<kCluster> walk;
  int j = cw;  // the block's tile index (this warpgroup's: every other one)
  for (int t = walk.first + cw * walk.step; t < a.num_tiles; t += 2 * walk.step, j += 2) {
    int tm, tn;
    walk.tile(a, t, tm, tn);
    const int row0 = tm * kBM + warp * 16 + (lane >> 2);
    // Stage the tile's column scale and bias (one a thread) once this warpgroup's last epilogue has read
    // them; fetch the thread's four row scales. Both land during the mainloop.
    ws_named_sync(kColsBar + cw, 128);
    {
      const int col = tn * kBN + wt;
      cols[wt] = a.w_scale[col];
      cols[kBN + wt] = a.bias ? to_f(static_cast<const T*>(a.bias)[col]) : 0.f;
    }
    float xs[2][2];
#pragma unroll
    for (int q = 0; q < 2; ++q)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = row0 + 64 * q + 8 * h;
        xs[q][h] = row < a.n ? a.x_scale[row] : 0.f;
      }
    float d0[16][4], d1[16][4];
#pragma unroll
    for (int i = 0; i < 16; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) d0[i][e] = d1[i][e] = 0.f;
    // The other warpgroup's previous tile (j - 1) has issued its mainloop: its stages are all in.
    if (j > 0) ws_named_sync(kTurnBar + (cw ^ 1), 256);
    int it = j * k_iters;
    uint32_t prev_empty = 0;
    for (int kk = 0; kk < k_iters; ++kk, ++it) {
      const int s = it % kStages;
      const uint32_t full = base + kBarOffset + 8 * s;
      ws_bar_wait(full, (it / kStages) & 1);
      const uint32_t stage = base + s * kStageBytes;
      const uint64_t db = wgmma_desc(stage + kABytes, 16, 1024);
      fp8_stage_mma(d0, d1, wgmma_desc(stage, 16, 1024), db, wgmma_desc(stage + 64 * kBK, 16, 1024), db);
      if (kk > 0) {
        wgmma_wait<1>();  // the previous stage's wgmma are done: its buffers may be refilled
        release<kCluster>(prev_empty, lane);
      }
      prev_empty = full + 8 * kStages;
    }
    // Hand the tensor cores over (only if the other warpgroup has a next tile: no arrival left unmatched).
    if (t + walk.step < a.num_tiles) ws_named_arrive(kTurnBar + cw, 256);
    wgmma_wait<0>();
    release<kCluster>(prev_empty, lane);
    reg_fence(d0);
    reg_fence(d1);
    ws_named_sync(kColsBar + cw, 128);  // the staged columns are written
    const int c0 = 2 * (lane & 3), col0 = tn * kBN + c0;
    fp8_store_block<T, kBN>(a, d0, row0, col0, cols, c0, xs[0]);
    fp8_store_block<T, kBN>(a, d1, row0 + 64, col0, cols, c0, xs[1]);
  }
}

template <typename T, int kCluster>
__global__ void __launch_bounds__(kThreads, 1)
    fp8_gemm_pingpong_kernel(const Fp8GemmArgs a, const __grid_constant__ Fp8GemmMaps maps) {
  extern __shared__ __align__(1024) unsigned char gemm_smem_raw[];
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(gemm_smem_raw));
  const uint32_t base = (raw + 1023u) & ~1023u;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      ws_bar_init(base + kBarOffset + 8 * s, 1);                          // full: the producer's arrival + TMA bytes
      ws_bar_init(base + kBarOffset + 8 * (kStages + s), 4 * kCluster);  // empty: each consumer warp of the cluster
    }
    if constexpr (kCluster > 1) fence_barrier_init();
  }
  // Every block's barriers are initialised before any block multicasts into it or arrives on it.
  if constexpr (kCluster > 1) cluster_sync_all();
  else __syncthreads();
  pdl_enter();  // before the first read of xq / the scales and the first write of out
  if (threadIdx.x < 128) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProdRegs));
    if (threadIdx.x == 0) produce<kCluster>(a, maps, base);
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kMathRegs));
    const int cw = (threadIdx.x >> 7) - 1;
    float* cols = reinterpret_cast<float*>(gemm_smem_raw + (base - raw) + kColOffset + cw * kColBytes);
    consume<T, kCluster>(a, base, cols, cw);
  }
  // No block leaves while the other may still arrive on its barriers (its multicasts all landed: consumed).
  if constexpr (kCluster > 1) cluster_sync_all();
}

int max_active_pairs() {
  static const int pairs = [] {
    auto kernel = fp8_gemm_pingpong_kernel<__nv_bfloat16, 2>;
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(2 * 66);
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = kSmemBytes;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = 2;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    VIREO_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSmemBytes)));
    int n = 0;
    VIREO_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&n, kernel, &cfg));
    return std::max(n, 1);
  }();
  return pairs;
}

template <typename T, int kCluster>
void launch_typed(const Fp8GemmArgs& a, const Fp8GemmMaps& maps, cudaStream_t stream) {
  auto kernel = fp8_gemm_pingpong_kernel<T, kCluster>;
  static const bool attr_set = [&] {
    VIREO_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSmemBytes)));
    return true;
  }();
  (void)attr_set;
  if constexpr (kCluster == 1) {
    const int blocks = std::min(a.num_tiles, fp8_gemm_sm_count());
    launch_pdl(kernel, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), kSmemBytes, stream, a, maps);
  } else {
    const int clusters = std::min(a.num_tiles, max_active_pairs());
    launch_pdl_clusters(kernel, dim3(static_cast<unsigned>(kCluster * clusters)), dim3(kThreads), kSmemBytes, stream, kCluster,
                        "cudaLaunchKernelEx(fp8 gemm, clusters)", a, maps);
  }
  check_launch("fp8 gemm (ping-pong)");
}

}  // namespace

bool fp8_gemm_pingpong_ok(int64_t n, int64_t m, int64_t k) {
  return n >= 1 && m > 0 && k > 0 && m % kBN == 0 && k % kBK == 0 && n < (int64_t{1} << 30) && m < (int64_t{1} << 30) &&
         k < (int64_t{1} << 30) && n * m < (int64_t{1} << 40);
}

int fp8_gemm_pair_clusters() { return max_active_pairs(); }

void launch_fp8_gemm_pingpong(const CublasLtGemm::Fp8Args& g, cudaStream_t stream, int cluster) {
  if (!fp8_gemm_pingpong_ok(g.n, g.m, g.k)) throw Error("fp8 gemm (ping-pong): shape not taken");
  if (cluster != 1 && cluster != 2) throw Error("fp8 gemm (ping-pong): clusters of 1 or 2 blocks");
  Fp8GemmMaps maps{};
  if (!u8_rows_tensor_map(g.xq, g.n, g.k, kBM, &maps.x) ||
      !fp8_weight_tensor_map(g.w, g.m, g.k, kBN / cluster, &maps.w))
    throw Error("fp8 gemm (ping-pong): the driver refused a tensor map");
  Fp8GemmArgs a{g.w_scale, g.x_scale, g.bias, g.residual, g.out, static_cast<int>(g.n), static_cast<int>(g.m),
                static_cast<int>(g.k), 0, 0, 0, 0};
  // With clusters, the walk's "row tiles" are pairs of them (a pair past n is zero-filled, never stored).
  const int row_tiles = static_cast<int>((g.n + kBM - 1) / kBM);
  a.tiles_m = (row_tiles + cluster - 1) / cluster;
  a.tiles_n = static_cast<int>(g.m / kBN);
  a.num_tiles = a.tiles_m * a.tiles_n;
  a.group_m = fp8_gemm_group_rows(a.tiles_m, kBM * cluster, g.k);
  const bool bf16 = g.out_dtype == DType::kBF16;
  if (!bf16 && g.out_dtype != DType::kF16) throw Error("fp8 gemm (ping-pong): out must be bf16 or f16");
  if (cluster == 1) bf16 ? launch_typed<__nv_bfloat16, 1>(a, maps, stream) : launch_typed<__half, 1>(a, maps, stream);
  else bf16 ? launch_typed<__nv_bfloat16, 2>(a, maps, stream) : launch_typed<__half, 2>(a, maps, stream);
}

}  // namespace vireo::cuda
