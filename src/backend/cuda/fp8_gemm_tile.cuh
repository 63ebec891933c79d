// What the warp-specialised W8A8 GEMMs (fp8_gemm_ws.cu: cooperative, fp8_gemm_pingpong.cu: ping-pong) share:
// their arguments, the order they walk output tiles in, and the epilogue that writes a tile from registers.
#pragma once
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "backend/cuda/cuda_types.cuh"
#include "backend/cuda/wgmma_common.cuh"
#include "backend/cuda/wgmma_fp8.cuh"

namespace vireo::cuda {
namespace {

struct Fp8GemmArgs {
  const float* w_scale;  // [m]
  const float* x_scale;  // [n]
  const void* bias;      // [m] T or null
  const void* residual;  // [n, m] T or null (may alias out)
  void* out;             // [n, m] T
  int n, m, k;
  int tiles_m, tiles_n, num_tiles;
  int group_m;  // row tiles a group (fp8_gemm_group_rows)
};

struct Fp8GemmMaps {
  CUtensorMap x, w;  // xq [n, k] and w [m, k], boxes of 128 bytes x the tile's rows
};

// Tile t -> (row tile tm, column tile tn). Tiles walk groups of group_m row tiles, inside a group column by
// column, so the blocks running at once read a few weight tiles and at most group_m x 128 activation rows:
// both stay in L2 (session 55: walking all row tiles before the next column re-read 32 MiB of activations
// from DRAM for every column at 8,192 rows, 15-31% slower than cuBLASLt there).
__device__ __forceinline__ void fp8_gemm_tile(const Fp8GemmArgs& a, int t, int& tm, int& tn) {
  const int per_group = a.group_m * a.tiles_n;
  const int g = t / per_group, first = g * a.group_m;
  const int rows = min(a.group_m, a.tiles_m - first);
  const int r = t - g * per_group;
  tm = first + r % rows;
  tn = r / rows;
}

// One 128-byte K stage into two m64n128 accumulator blocks: d0 += A0 B0^T, d1 += A1 B1^T, 4 k32 steps of E4M3
// wgmma each (descriptors of 128B-swizzled [rows, 128 B] tiles), issued and committed as one group.
__device__ __forceinline__ void fp8_stage_mma(float (&d0)[16][4], float (&d1)[16][4], uint64_t a0, uint64_t b0,
                                              uint64_t a1, uint64_t b1) {
  wgmma_fence();
#pragma unroll
  for (int k32 = 0; k32 < 4; ++k32) {
    wgmma_fp8_ss<128>(d0, wgmma_desc_add(a0, 32 * k32), wgmma_desc_add(b0, 32 * k32), 1);
    wgmma_fp8_ss<128>(d1, wgmma_desc_add(a1, 32 * k32), wgmma_desc_add(b1, 32 * k32), 1);
  }
  wgmma_commit();
}

// Two adjacent outputs in one 4-byte store (col is even and m a multiple of the tile width).
__device__ __forceinline__ void fp8_store2(__nv_bfloat16* p, float a, float b) {
  *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(a, b);
}
__device__ __forceinline__ void fp8_store2(__half* p, float a, float b) {
  *reinterpret_cast<__half2*>(p) = __floats2half2_rn(a, b);
}

// One m64n128 accumulator block out: d[i][e] is row row0 + 8 (e >> 1), column col0 + 8 i + (e & 1) (row0, col0
// carry the lane's offsets). cols: the tile's staged [scales: kCols | biases: kCols] (F32), c0 the lane's first
// column in them; xs[h]: the x_scale of row row0 + 8 h. One rounding after scales, bias and residual.
template <typename T, int kCols>
__device__ __forceinline__ void fp8_store_block(const Fp8GemmArgs& a, float (&d)[16][4], int row0, int col0,
                                                const float* cols, int c0, const float (&xs)[2]) {
  T* out = static_cast<T*>(a.out);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = row0 + 8 * h;
    if (row >= a.n) continue;
    const int64_t base = int64_t{row} * a.m;
    uint32_t res[16];  // the residual's pairs, all loads issued before the first use
    if (a.residual) {
#pragma unroll
      for (int i = 0; i < 16; ++i)
        res[i] = *reinterpret_cast<const uint32_t*>(static_cast<const T*>(a.residual) + base + col0 + 8 * i);
    }
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const int col = col0 + 8 * i, c = c0 + 8 * i;
      const float2 ws = *reinterpret_cast<const float2*>(cols + c);
      const float2 b = *reinterpret_cast<const float2*>(cols + kCols + c);
      float v0 = d[i][2 * h] * xs[h] * ws.x + b.x, v1 = d[i][2 * h + 1] * xs[h] * ws.y + b.y;
      if (a.residual) {
        const T* r = reinterpret_cast<const T*>(&res[i]);
        v0 += to_f(r[0]), v1 += to_f(r[1]);
      }
      fp8_store2(out + base + col, v0, v1);
    }
  }
}

}  // namespace
}  // namespace vireo::cuda
