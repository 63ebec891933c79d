// The 128-row prefill shape of the tensor-core paged attention (launched by attention_mma.cu).
#pragma once
#include "backend/cuda/attention_mma_common.cuh"

namespace vireo::cuda {
namespace {

// Prefill shape with two 16-row m-tiles per warp (128 rows per block): each K/V fragment read from
// shared memory feeds two mma, halving shared-memory traffic per FLOP against the 64-row shape. Q
// sits in shared memory (ldmatrix per k-step) to leave registers for 2 x D/8 output tiles; two stages.
constexpr int kWideStages = 2;
constexpr int kWideMT = 2;

template <typename T, int D>
constexpr size_t wide_smem_bytes() {
  return (kWideStages * 2 * kBN + 4 * 16 * kWideMT) * static_cast<size_t>(D + kPad) * sizeof(T);
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads) attention_prefill_wide_kernel(MmaArgs a) {
  constexpr int kBM = 4 * 16 * kWideMT;
  constexpr int kNT = kBN / 8;
  constexpr int kDT = D / 8;
  constexpr int kLd = D + kPad;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* ks = reinterpret_cast<T*>(smem_raw);     // [kWideStages][kBN][kLd]
  T* vs = ks + kWideStages * kBN * kLd;       // [kWideStages][kBN][kLd]
  T* qs = vs + kWideStages * kBN * kLd;       // [kBM][kLd]
  pdl_enter();  // launched with PDL (pdl.cuh): before any read of q / the cache and any return

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
  const int s = blockIdx.y / a.num_kv_heads, hk = blockIdx.y % a.num_kv_heads;
  const int q0 = a.query_start[s], q_len = a.query_start[s + 1] - q0, kv_len = a.seq_lens[s];
  const int rows = q_len * a.group;
  if (q_len <= 0 || rows <= 16) return;
  const int row0 = (gridDim.x - 1 - blockIdx.x) * kBM;  // heaviest (last) rows first
  if (row0 >= rows) return;
  const int split_len = split_len_for(kv_len, a.split_len_prefill, a.splits_prefill);
  const int nsplit = (kv_len + split_len - 1) / split_len;
  if (static_cast<int>(blockIdx.z) >= nsplit) return;
  const int kstart = blockIdx.z * split_len;
  const int last_tok = (min(rows, row0 + kBM) - 1) / a.group;
  const int kend = min(min(kv_len, kstart + split_len), kv_len - q_len + last_tok + 1);
  const int ntiles = kend > kstart ? (kend - kstart + kBN - 1) / kBN : 0;

  // Q tile -> shared memory (zero rows past the sequence).
  {
    constexpr int kChunks = D / 8;
    for (int c = threadIdx.x; c < kBM * kChunks; c += kThreads) {
      const int r = c / kChunks, col = (c % kChunks) * 8;
      const int rr = row0 + r;
      uint4 v = make_uint4(0, 0, 0, 0);
      if (rr < rows) {
        const int64_t th = static_cast<int64_t>(q0 + rr / a.group) * a.num_heads + hk * a.group + rr % a.group;
        v = *reinterpret_cast<const uint4*>(static_cast<const T*>(a.q) + th * D + col);
      }
      *reinterpret_cast<uint4*>(qs + r * kLd + col) = v;
    }
  }
  const int wr0 = row0 + warp * 16 * kWideMT;
  int tok[kWideMT][2], pos[kWideMT][2];
#pragma unroll
  for (int mt = 0; mt < kWideMT; ++mt)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int r = wr0 + mt * 16 + g + 8 * i;
      tok[mt][i] = r < rows ? r / a.group : -1;
      pos[mt][i] = r < rows ? kv_len - q_len + tok[mt][i] : -1;
    }

  const int* table = a.block_tables + static_cast<int64_t>(s) * a.max_blocks_per_seq;
  auto load_tile = [&](int it, int stage) { load_kv_tile<T, D>(a, table, hk, kstart + it * kBN, kend, ks, vs, stage); };

  float oacc[kWideMT][kDT][4];
#pragma unroll
  for (int mt = 0; mt < kWideMT; ++mt)
#pragma unroll
    for (int i = 0; i < kDT; ++i) oacc[mt][i][0] = oacc[mt][i][1] = oacc[mt][i][2] = oacc[mt][i][3] = 0.f;
  float m[kWideMT][2], l[kWideMT][2];
#pragma unroll
  for (int mt = 0; mt < kWideMT; ++mt) m[mt][0] = m[mt][1] = -INFINITY, l[mt][0] = l[mt][1] = 0.f;

#pragma unroll
  for (int st = 0; st < kWideStages - 1; ++st) {
    if (st < ntiles) load_tile(st, st);
    cp_async_commit();
  }
  const bool warp_rows_full = wr0 + 16 * kWideMT - 1 < rows;
  const int warp_min_pos = kv_len - q_len + wr0 / a.group;
  for (int it = 0; it < ntiles; ++it) {
    const int stage = it % kWideStages;
    cp_async_wait<kWideStages - 2>();
    __syncthreads();  // tile `it` (and the Q tile) visible; every warp done with tile it - 1
    if (it + kWideStages - 1 < ntiles) load_tile(it + kWideStages - 1, (it + kWideStages - 1) % kWideStages);
    cp_async_commit();
    const T* kt = ks + stage * kBN * kLd;
    const T* vt = vs + stage * kBN * kLd;
    float sacc[kWideMT][kNT][4];
#pragma unroll
    for (int mt = 0; mt < kWideMT; ++mt)
#pragma unroll
      for (int i = 0; i < kNT; ++i) sacc[mt][i][0] = sacc[mt][i][1] = sacc[mt][i][2] = sacc[mt][i][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      unsigned qa[kWideMT][4];
#pragma unroll
      for (int mt = 0; mt < kWideMT; ++mt)
        ldmatrix_x4(qa[mt], qs + (warp * 16 * kWideMT + mt * 16 + (lane % 16)) * kLd + kk * 16 + (lane / 16) * 8);
#pragma unroll
      for (int nt = 0; nt < kNT; nt += 2) {
        unsigned b[4];
        const int key = nt * 8 + (lane % 8) + (lane / 16) * 8;
        const int col = kk * 16 + ((lane / 8) % 2) * 8;
        ldmatrix_x4(b, kt + key * kLd + col);
#pragma unroll
        for (int mt = 0; mt < kWideMT; ++mt) {
          mma16816<T>(sacc[mt][nt], qa[mt], b[0], b[1]);
          mma16816<T>(sacc[mt][nt + 1], qa[mt], b[2], b[3]);
        }
      }
    }
    const int kbase = kstart + it * kBN;
    const bool full = warp_rows_full && kbase + kBN - 1 <= warp_min_pos && kbase + kBN <= kend;
#pragma unroll
    for (int mt = 0; mt < kWideMT; ++mt) {
      float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int ri = e / 2;
          float v = sacc[mt][nt][e];
          if (!full) {
            const int key = kbase + nt * 8 + 2 * tq + (e & 1);
            v = (key < kend && key <= pos[mt][ri]) ? v : -INFINITY;
            sacc[mt][nt][e] = v;
          }
          mx[ri] = fmaxf(mx[ri], v);
        }
      online_softmax_step<kNT, kDT>(sacc[mt], oacc[mt], m[mt], l[mt], mx, a.scale_log2);
    }
#pragma unroll
    for (int kc = 0; kc < kNT / 2; ++kc) {
      unsigned pa[kWideMT][4];
#pragma unroll
      for (int mt = 0; mt < kWideMT; ++mt) {
        pa[mt][0] = pack2<T>(sacc[mt][2 * kc][0], sacc[mt][2 * kc][1]);
        pa[mt][1] = pack2<T>(sacc[mt][2 * kc][2], sacc[mt][2 * kc][3]);
        pa[mt][2] = pack2<T>(sacc[mt][2 * kc + 1][0], sacc[mt][2 * kc + 1][1]);
        pa[mt][3] = pack2<T>(sacc[mt][2 * kc + 1][2], sacc[mt][2 * kc + 1][3]);
      }
#pragma unroll
      for (int dt = 0; dt < kDT; dt += 2) {
        unsigned b[4];
        const int key = kc * 16 + (lane % 8) + ((lane / 8) % 2) * 8;
        const int col = dt * 8 + (lane / 16) * 8;
        ldmatrix_x4_trans(b, vt + key * kLd + col);
#pragma unroll
        for (int mt = 0; mt < kWideMT; ++mt) {
          mma16816<T>(oacc[mt][dt], pa[mt], b[0], b[1]);
          mma16816<T>(oacc[mt][dt + 1], pa[mt], b[2], b[3]);
        }
      }
    }
  }
  const int split = blockIdx.z;
  const bool direct = nsplit == 1;
#pragma unroll
  for (int mt = 0; mt < kWideMT; ++mt)
#pragma unroll
    for (int ri = 0; ri < 2; ++ri) {
      float ll = l[mt][ri];
      ll += __shfl_xor_sync(0xffffffffu, ll, 1);
      ll += __shfl_xor_sync(0xffffffffu, ll, 2);
      if (tok[mt][ri] < 0) continue;
      const int r = wr0 + mt * 16 + g + 8 * ri;
      const int64_t th = static_cast<int64_t>(q0 + tok[mt][ri]) * a.num_heads + hk * a.group + r % a.group;
      const float inv = ll > 0.f ? 1.f / ll : 0.f;
#pragma unroll
      for (int dt = 0; dt < kDT; ++dt) {
        const int col = dt * 8 + 2 * tq;
        const float o0 = oacc[mt][dt][2 * ri], o1 = oacc[mt][dt][2 * ri + 1];
        if (direct) {
          *reinterpret_cast<unsigned*>(static_cast<T*>(a.out) + th * D + col) = pack2<T>(o0 * inv, o1 * inv);
        } else {
          *reinterpret_cast<float2*>(a.ws_o + (th * a.max_splits + split) * D + col) = make_float2(o0, o1);
        }
      }
      if (!direct && tq == 0) a.ws_ml[th * a.max_splits + split] = make_float2(m[mt][ri], ll);
    }
}

}  // namespace
}  // namespace vireo::cuda
