// MoE per-slot ("decode") path with MXFP4 experts (MoeParams gate_up_scales; GPT-OSS's checkpoints kept
// packed): moe_decode.cu's two kernels and work split (a block: a group of <= kGroupTokens tokens
// sorted by expert, warps taking (distinct expert, rows) units, each unit's rows read once from HBM for
// every slot of the group that chose the expert), with the dot products on tensor cores. bf16 only.
//
// A unit is one m16 tile of weight rows: gate_up 8 intermediate indices (gate rows in tile rows 0-7, the
// same indices' up rows in 8-15, so a thread ends with gate and up of its outputs), down 16 output
// columns. Lane (g = lane / 4, t = lane % 4) loads 16 bytes (one 32-element MXFP4 block) of tile rows g
// and g + 8 at block 4c + t of chunk c, and its scale bytes; so each lane's mma k-values all come from
// one block and one scale. The k order inside an mma does not matter as long as A and B agree: mma i
// (of 8 a block) takes the pairs (8q + j, 8q + j + 4), q = i / 2, j = 2 (i % 2) + {0, 1} of the block
// in A (fp4_pair_bits: one shift-and-mask a pair, then one bf16x2 multiply by the scale) and the same
// elements of x / act in B (byte permutes of four 16-byte loads), for slots g of each n8 tile.
//   gate_up: act[s, i] = round(glu(g, u)), g = round(x[t] . gate_e[i]) (+ bias, rounded), likewise u
//   down:    y = round(act[s] . down_e[j]) (+ bias) per slot into shared memory, then per token the
//            ordered weighted sum of moe_decode.cu (ascending expert id).
// Bytes at batch 1, gpt-oss-20b (hidden 2880, I 2880, top-4): gate_up 4 x 5760 rows x (1440 + 90) B =
// 35 MB, 8.2 us at 4.3 TB/s; down 4 x 2880 x 1530 B = 17.6 MB, 4.1 us (bf16 experts: 3.8x as many).
// ALU: ~3 instructions an element to decode (the multiply-adds are the tensor cores'), under the bytes.
// Graph-capturable and deterministic as moe_decode.cu (no atomics, fixed order, grids from the shapes).
#include <algorithm>

#include "backend/cuda/activation.cuh"
#include "backend/cuda/attention_mma_common.cuh"
#include "backend/cuda/cuda_common.h"
#include "backend/cuda/moe.h"
#include "backend/cuda/moe_group.cuh"
#include "backend/cuda/mxfp4.cuh"

namespace vireo::cuda {
namespace {

using bf16 = __nv_bfloat16;
constexpr int kFpBlocksPerSm = 2;
constexpr int kFpB = 4;  // chunks (4 blocks of 32 of each of a lane's 2 rows) in flight a lane

// B operand pairs of one 32-element block of a bf16 row (x or act) at element b0 = 32 * blk: xb[p] holds
// elements (8q + j, 8q + j + 4), p = 4q + j; zeros when row is null.
__device__ __forceinline__ void load_b_pairs(const bf16* row, int64_t blk, unsigned (&xb)[16]) {
  if (row == nullptr) {
#pragma unroll
    for (int p = 0; p < 16; ++p) xb[p] = 0u;
    return;
  }
  const uint4* v = reinterpret_cast<const uint4*>(row + blk * 32);
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const uint4 u = __ldg(v + q);
    xb[4 * q + 0] = __byte_perm(u.x, u.z, 0x5410);
    xb[4 * q + 1] = __byte_perm(u.x, u.z, 0x7632);
    xb[4 * q + 2] = __byte_perm(u.y, u.w, 0x5410);
    xb[4 * q + 3] = __byte_perm(u.y, u.w, 0x7632);
  }
}

// acc[n] += W_tile . B over a row pair's whole k (nblk blocks): rows r0 (tile row g) and r1 (tile row
// g + 8) as packed bytes and scales; b_rows[n]: this lane's slot row of n-tile n (null: none).
template <int kNT>
__device__ __forceinline__ void fp4_tile_dot(const uint8_t* r0, const uint8_t* s0, const uint8_t* r1, const uint8_t* s1,
                                             int64_t nblk, const bf16* const (&b_rows)[kNT], float (&acc)[kNT][4]) {
  const int t = threadIdx.x % 4;
  for (int64_t c0 = 0; c0 < nblk; c0 += 4 * kFpB) {
    uint4 w0[kFpB], w1[kFpB];
    unsigned e0[kFpB], e1[kFpB];
#pragma unroll
    for (int b = 0; b < kFpB; ++b) {  // every load of the pass issued before any use
      const int64_t blk = c0 + 4 * b + t;
      if (blk < nblk) {
        w0[b] = __ldg(reinterpret_cast<const uint4*>(r0) + blk);
        w1[b] = __ldg(reinterpret_cast<const uint4*>(r1) + blk);
        e0[b] = __ldg(s0 + blk);
        e1[b] = __ldg(s1 + blk);
      } else {
        w0[b] = w1[b] = make_uint4(0, 0, 0, 0);
        e0[b] = e1[b] = 127u;
      }
    }
#pragma unroll
    for (int b = 0; b < kFpB; ++b) {
      if (c0 + 4 * b >= nblk) break;  // warp-uniform
      const int64_t blk = c0 + 4 * b + t;
      unsigned xb[kNT][16];
#pragma unroll
      for (int n = 0; n < kNT; ++n) load_b_pairs(blk < nblk ? b_rows[n] : nullptr, blk, xb[n]);
      const Fp4Scale f0 = fp4_scale(e0[b]), f1 = fp4_scale(e1[b]);
      const unsigned* q0 = &w0[b].x;
      const unsigned* q1 = &w1[b].x;
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const int q = i / 2, j = 2 * (i % 2);
        const unsigned a[4] = {fp4_scaled(fp4_pair_bits(q0[q], j), f0), fp4_scaled(fp4_pair_bits(q1[q], j), f1),
                               fp4_scaled(fp4_pair_bits(q0[q], j + 1), f0), fp4_scaled(fp4_pair_bits(q1[q], j + 1), f1)};
#pragma unroll
        for (int n = 0; n < kNT; ++n) mma16816<bf16>(acc[n], a, xb[n][2 * i], xb[n][2 * i + 1]);
      }
    }
  }
}

// grid: (ceil(I / (8 * groups)), ceil(T / kGroupTokens)). Unit u: distinct expert u / groups, intermediate
// indices i0 = 8 * (blockIdx.x * groups + u % groups) + [0, 8). kNT: n8 tiles of slots a pass (1 when
// T <= 8: an expert has at most 8 slots of the group).
template <int kNT>
__global__ void __launch_bounds__(kDecThreads, kFpBlocksPerSm)
    moe_gate_up_mxfp4_kernel(const bf16* x, const uint8_t* w, const uint8_t* ws, const int* ids, int64_t tokens, int k,
                             int64_t hidden, int64_t inter, int groups, MoeExtras ex, bf16* act) {
  __shared__ Group g;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * kGroupTokens;
  const int nt = static_cast<int>(min(static_cast<int64_t>(kGroupTokens), tokens - t0));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gq = lane / 4, tq = lane % 4;
  const int64_t nblk = hidden / 32, row_bytes = hidden / 2;
  pdl_enter();  // ids from the route kernel
  build_group(g, ids + t0 * k, nt * k, k);
  for (int u = warp; u < g.nexp * groups; u += kDecWarps) {
    const int eu = u / groups;
    const int64_t i0 = 8 * (static_cast<int64_t>(blockIdx.x) * groups + u % groups);
    if (i0 >= inter) continue;  // I % 32 == 0: a unit's 8 indices are all in range
    const int64_t grow = static_cast<int64_t>(g.expert[eu]) * 2 * inter + i0 + gq, urow = grow + inter;
    const int end = g.start[eu + 1];
    for (int sp = g.start[eu]; sp < end; sp += 8 * kNT) {
      const bf16* b_rows[kNT];
#pragma unroll
      for (int n = 0; n < kNT; ++n) {
        const int s = sp + 8 * n + gq;
        b_rows[n] = s < end ? x + (t0 + g.order[s] / k) * hidden : nullptr;
      }
      float acc[kNT][4] = {};
      fp4_tile_dot<kNT>(w + grow * row_bytes, ws + grow * nblk, w + urow * row_bytes, ws + urow * nblk, nblk, b_rows, acc);
      // acc[n]: (gate row gq, slots 2 tq, 2 tq + 1) in [0], [1]; the up row's in [2], [3].
      const bf16* bias = static_cast<const bf16*>(ex.gate_up_b);  // [E, 2 * inter] or null
#pragma unroll
      for (int n = 0; n < kNT; ++n)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int s = sp + 8 * n + 2 * tq + h;
          if (s >= end) continue;
          const int64_t b0 = static_cast<int64_t>(g.expert[eu]) * 2 * inter + i0 + gq;
          const float gf = add_bias(to_f(from_f<bf16>(acc[n][h])), bias, b0);
          const float uf = add_bias(to_f(from_f<bf16>(acc[n][2 + h])), bias, b0 + inter);
          act[(t0 * k + g.order[s]) * inter + i0 + gq] = from_f<bf16>(moe_glu(gf, uf, ex.alpha, ex.limit));
        }
    }
  }
}

// grid: (ceil(hidden / (16 * tiles)), ceil(T / kGroupTokens)); block columns j0 = 16 * tiles * blockIdx.x
// + [0, 16 * tiles). Unit u: distinct expert u / tiles, columns j0 + 16 (u % tiles) + [0, 16). y of the
// block's columns goes to ys [slots][16 * tiles] (dynamic shared memory), then thread (token, column)
// sums its k slots in ascending expert id (moe_decode.cu's sum, down_b added to each rounded y).
template <int kNT>
__global__ void __launch_bounds__(kDecThreads, kFpBlocksPerSm)
    moe_down_mxfp4_kernel(const bf16* act, const uint8_t* w, const uint8_t* ws, const int* ids, const float* weights,
                          int64_t tokens, int k, int64_t hidden, int64_t inter, int tiles, const bf16* down_b, bf16* out) {
  extern __shared__ float ys[];  // [nt * k][16 * tiles]
  __shared__ Group g;
  const int cols = 16 * tiles;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * kGroupTokens;
  const int nt = static_cast<int>(min(static_cast<int64_t>(kGroupTokens), tokens - t0));
  const int64_t j0 = static_cast<int64_t>(blockIdx.x) * cols;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gq = lane / 4, tq = lane % 4;
  const int64_t nblk = inter / 32, row_bytes = inter / 2;
  build_group(g, ids + t0 * k, nt * k, k);  // ids are complete before gate_up started (moe.h)
  pdl_enter();                              // act from gate_up
  for (int u = warp; u < g.nexp * tiles; u += kDecWarps) {
    const int eu = u / tiles, c0 = (u % tiles) * 16;  // first column of the unit in the block
    if (j0 + c0 >= hidden) continue;                  // hidden % 32 == 0: all 16 columns in range
    const int64_t r0 = static_cast<int64_t>(g.expert[eu]) * hidden + j0 + c0 + gq, r1 = r0 + 8;
    const int end = g.start[eu + 1];
    for (int sp = g.start[eu]; sp < end; sp += 8 * kNT) {
      const bf16* b_rows[kNT];
#pragma unroll
      for (int n = 0; n < kNT; ++n) {
        const int s = sp + 8 * n + gq;
        b_rows[n] = s < end ? act + (t0 * k + g.order[s]) * inter : nullptr;
      }
      float acc[kNT][4] = {};
      fp4_tile_dot<kNT>(w + r0 * row_bytes, ws + r0 * nblk, w + r1 * row_bytes, ws + r1 * nblk, nblk, b_rows, acc);
#pragma unroll
      for (int n = 0; n < kNT; ++n)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int s = sp + 8 * n + 2 * tq + h;  // sorted position
          if (s >= end) continue;
          ys[s * cols + c0 + gq] = acc[n][h];
          ys[s * cols + c0 + gq + 8] = acc[n][2 + h];
        }
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < nt * cols; i += kDecThreads) {
    const int m = i / cols, c = i % cols;
    if (j0 + c >= hidden) continue;
    float acc = 0.f;
    for (int r = 0; r < k; ++r) {
      const int j = g.tok_order[m * k + r];
      const float y = add_bias(to_f(from_f<bf16>(ys[g.pos[j] * cols + c])), down_b, g.id[j] * hidden + j0 + c);
      acc = to_f(from_f<bf16>(acc + to_f(from_f<bf16>(y * weights[t0 * k + j]))));
    }
    out[(t0 + m) * hidden + j0 + c] = from_f<bf16>(acc);
  }
}

int64_t fp4_resident_blocks() {
  int dev = 0, sms = 0;
  VIREO_CUDA_CHECK(cudaGetDevice(&dev));
  VIREO_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return int64_t{sms} * kFpBlocksPerSm;
}

// Units per block so that one group's blocks are about one wave (gpt-oss-20b, 132 SMs: gate_up 360
// index groups -> 2 a block, 180 blocks; down 180 column tiles -> 1 a block, 180 blocks).
int units_per_block(int64_t units) {
  return static_cast<int>(std::max<int64_t>(1, (units + fp4_resident_blocks() - 1) / fp4_resident_blocks()));
}

void check_mxfp4(int top_k, int64_t tokens, int64_t hidden, int64_t inter, const void* w, const void* x) {
  if (top_k < 1 || top_k > kMaxTopK) throw Error("cuda moe mxfp4 decode: top_k out of range");
  if (hidden % 32 != 0 || inter % 32 != 0) throw Error("cuda moe mxfp4 decode: hidden and inter must be multiples of 32");
  if ((reinterpret_cast<uintptr_t>(w) | reinterpret_cast<uintptr_t>(x)) & 15)
    throw Error("cuda moe mxfp4 decode: weights and activations must be 16-byte aligned");
  if ((tokens + kGroupTokens - 1) / kGroupTokens > 65535) throw Error("cuda moe mxfp4 decode: too many tokens");
}

}  // namespace

void launch_moe_gate_up_decode_mxfp4(const void* x, const void* gate_up_w, const void* gate_up_s, const int* ids,
                                     int64_t tokens, int top_k, int64_t hidden, int64_t inter, void* act,
                                     cudaStream_t stream, const MoeExtras& extras) {
  check_mxfp4(top_k, tokens, hidden, inter, gate_up_w, x);
  if (tokens == 0) return;
  const int64_t index_groups = inter / 8;
  const int groups = units_per_block(index_groups);
  const dim3 grid(static_cast<unsigned>((index_groups + groups - 1) / groups),
                  static_cast<unsigned>((tokens + kGroupTokens - 1) / kGroupTokens));
  auto run = [&](auto kernel) {
    launch_pdl(kernel, grid, dim3(kDecThreads), 0, stream, static_cast<const bf16*>(x),
               static_cast<const uint8_t*>(gate_up_w), static_cast<const uint8_t*>(gate_up_s), ids, tokens, top_k, hidden,
               inter, groups, extras, static_cast<bf16*>(act));
  };
  if (tokens <= 8) run(moe_gate_up_mxfp4_kernel<1>);
  else run(moe_gate_up_mxfp4_kernel<2>);
  check_launch("moe gate_up decode mxfp4");
}

void launch_moe_down_decode_mxfp4(const void* act, const void* down_w, const void* down_s, const int* ids,
                                  const float* weights, int64_t tokens, int top_k, int64_t hidden, int64_t inter,
                                  void* out, cudaStream_t stream, const MoeExtras& extras) {
  check_mxfp4(top_k, tokens, hidden, inter, down_w, act);
  if (tokens == 0) return;
  const int64_t col_tiles = hidden / 16;
  const int tiles = units_per_block(col_tiles);
  const dim3 grid(static_cast<unsigned>((col_tiles + tiles - 1) / tiles),
                  static_cast<unsigned>((tokens + kGroupTokens - 1) / kGroupTokens));
  const int64_t slots = std::min<int64_t>(tokens, kGroupTokens) * top_k;
  const size_t smem = static_cast<size_t>(slots) * 16 * tiles * sizeof(float);
  if (smem > 160 * 1024) throw Error("cuda moe down decode mxfp4: too much shared memory for the shape");
  // Both instantiations at once: they share a type, so a static inside the generic lambda below would
  // be one flag for the two.
  static const bool ready = [] {
    for (auto kernel : {moe_down_mxfp4_kernel<1>, moe_down_mxfp4_kernel<2>})
      check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 160 * 1024),
            "moe down decode mxfp4: cudaFuncSetAttribute");
    return true;
  }();
  (void)ready;
  auto run = [&](auto kernel) {
    launch_pdl(kernel, grid, dim3(kDecThreads), smem, stream, static_cast<const bf16*>(act),
               static_cast<const uint8_t*>(down_w), static_cast<const uint8_t*>(down_s), ids, weights, tokens, top_k,
               hidden, inter, tiles, static_cast<const bf16*>(extras.down_b), static_cast<bf16*>(out));
  };
  if (tokens <= 8) run(moe_down_mxfp4_kernel<1>);
  else run(moe_down_mxfp4_kernel<2>);
  check_launch("moe down decode mxfp4");
}

}  // namespace vireo::cuda
