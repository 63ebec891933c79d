// MoE decode path (moe.h "per-slot path"; the few-token calls below kMoeGroupedMinSlots): the expert
// GEMVs after the route kernel (moe.cu). Two kernels, both streaming expert rows at HBM speed:
//   gate_up: act [S = T * k, I]: act[s, i] = round(glu(g, u)), g = round(x[t] . gate_e[i]) and
//            u = round(x[t] . up_e[i]) (each round(. + bias) again with gate_up_b); glu: silu(g) * u or
//            GPT-OSS's clamped SwiGLU (activation.cuh moe_glu)
//   down:    out [T, hidden]:  y = round(act[s] . down_e[j]) per slot (round(y + b_down[e, j]) with
//            down_b), then per token, in ascending expert id (HF's index_add_ order):
//            acc = round(acc + round(y * weight[s]))
// (the rounding of the former one-warp-per-output kernels and of the grouped path; only the fp32 dot
// products' summation order differs).
//
// Work split. A block takes a group of up to kGroupTokens tokens and a chunk of weight rows (gate_up: 2-3
// intermediate indices, i.e. their gate and up rows of every expert; down: 6-8 output columns; sized so
// the grid is one wave of resident blocks). It sorts the group's slots by expert in shared memory
// (build_group: expert ids are only known on the device), then its warps take (distinct expert, row)
// units: a unit's rows are read ONCE from HBM with 16-byte loads (kB vectors a lane a row in flight)
// and dotted with the x / act rows of every token of the group that chose that expert (x and act are
// a few KB, L1 / L2 resident). So with T > 1 tokens sharing an expert the weight read is shared, and
// the grids (Qwen3-30B-A3B, T = 1: 384 gate_up blocks, 342 down blocks, all resident at once) keep all
// 132 SMs streaming. down keeps y of its columns in shared memory and does the ordered weighted sum
// itself: no y scratch, no combine launch.
// down's ids / sort and an L2 prefetch of its first rows run before its PDL wait: ids come from the
// route kernel two launches back, which completed before gate_up (which waited on it) let down start.
// In both kernels a warp prefetches its next unit's rows into L2 (prefetch.global.L2: no registers)
// before streaming the current one, so a warp has ~2 units in flight, not 1: at T = 8 a warp works
// through ~24 units one after the other, each one HBM round trip without it
// (VIREO_MOE_DECODE_PREFETCH=0 turns it off for A/B runs).
//
// Bytes and expected time, Qwen3-30B-A3B (hidden 2048, I 768, bf16), at 4.2 TB/s:
//   gate_up: distinct experts x 2 * 768 * 2048 * 2 B = 6.29 MB each; T = 1 (8 experts) 50.3 MB, 12.0 us;
//            T = 8 (~64 experts) 403 MB, 96 us.
//   down:    distinct experts x 2048 * 768 * 2 B = 3.15 MB each; T = 1 25.2 MB, 6.0 us; T = 8 201 MB, 48 us.
// Aim: >= 65% of that, T = 1 gate_up + down under ~28 us (the former kernels: ~52 us). Expected
// T = 1: gate_up ~15 us (12.6 MB in flight: 384 blocks x 8 warps x 4 KB), down ~8 us (most of its bytes
// prefetched into L2 while gate_up finishes); T = 8: ~110 + ~60 us.
// Graph-capturable (grids from T and the shapes only; blocks with no work exit), deterministic (no
// atomics: every output element is written by one thread in a fixed order).
#include <algorithm>
#include <cstdlib>

#include "backend/cuda/activation.cuh"
#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_types.cuh"
#include "backend/cuda/moe.h"
#include "backend/cuda/moe_group.cuh"
#include "backend/cuda/pdl.cuh"

namespace vireo::cuda {
namespace {

// Tokens a warp serves per pass over a unit's rows (accumulators in registers): 1 when T = 1 (fewer
// registers, 3 blocks an SM), else 4 (an expert chosen by more tokens of the group takes more passes;
// the repeat reads hit L1 / L2).
constexpr int kShareMany = 4;
constexpr int blocks_per_sm(int share) { return share == 1 ? 3 : 2; }
constexpr int kGateUpB = 4;                                // 16-byte vectors a lane a row in flight (gate_up)
constexpr int kDownRows = 8, kDownUnitRows = 2;            // output columns per down block (at most) / per unit
constexpr int kDownB = 3;                                  // vectors a lane a row (I = 768: 96 vectors, one pass)
constexpr int kDownPrefetchLines = (64 << 10) / 128;       // 64 KiB of L2 prefetch a block before the wait

// Vector v (elements v * kN ..) of a row of n elements: one 16-byte load (kVec: n % kN == 0, row
// 16-byte aligned), else element loads, zero past n.
template <typename T, bool kVec>
__device__ __forceinline__ Vec<T> load_vec(const T* row, int64_t v, int64_t n) {
  Vec<T> r;
  if constexpr (kVec) {
    r.raw = __ldg(reinterpret_cast<const uint4*>(row) + v);
  } else {
#pragma unroll
    for (int e = 0; e < Vec<T>::kN; ++e) {
      const int64_t i = v * Vec<T>::kN + e;
      r.v[e] = i < n ? row[i] : from_f<T>(0.f);
    }
  }
  return r;
}

// grid: (ceil(I / rows), ceil(T / kGroupTokens)). Unit u of the block: distinct expert u / rows,
// intermediate index i0 + u % rows: its gate and up rows ([hidden] each), kGateUpB vectors of each a
// lane in flight, dotted with the x rows of the expert's tokens (kS at a time).
template <typename T, bool kVec, int kS>
__global__ void __launch_bounds__(kDecThreads, blocks_per_sm(kS))
    moe_gate_up_decode_kernel(const T* x, const T* w, const int* ids, int64_t tokens, int k, int64_t hidden,
                              int64_t inter, int rows, bool prefetch, MoeExtras ex, T* act) {
  constexpr int kN = Vec<T>::kN;
  __shared__ Group g;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * kGroupTokens;
  const int nt = static_cast<int>(min(static_cast<int64_t>(kGroupTokens), tokens - t0));
  const int64_t i0 = static_cast<int64_t>(blockIdx.x) * rows;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t nvec = (hidden + kN - 1) / kN;
  pdl_enter();  // ids from the route kernel
  build_group(g, ids + t0 * k, nt * k, k);
  for (int u = warp; u < g.nexp * rows; u += kDecWarps) {
    const int eu = u / rows;
    const int64_t i = i0 + u % rows;
    if (i >= inter) continue;
    const T* gw = w + (static_cast<int64_t>(g.expert[eu]) * 2 * inter + i) * hidden;
    const T* uw = gw + inter * hidden;
    if (prefetch && u + kDecWarps < g.nexp * rows) {  // the warp's next unit into L2 while this one streams
      const int nu = u + kDecWarps;
      const int64_t ni = i0 + nu % rows;
      if (ni < inter) {
        const T* ngw = w + (static_cast<int64_t>(g.expert[nu / rows]) * 2 * inter + ni) * hidden;
        prefetch_range_l2(ngw, hidden * static_cast<int64_t>(sizeof(T)), lane);
        prefetch_range_l2(ngw + inter * hidden, hidden * static_cast<int64_t>(sizeof(T)), lane);
      }
    }
    const int end = g.start[eu + 1];
    for (int sp = g.start[eu]; sp < end; sp += kS) {
      const int cnt = min(kS, end - sp);  // warp-uniform
      float ag[kS], au[kS];
#pragma unroll
      for (int s = 0; s < kS; ++s) ag[s] = au[s] = 0.f;
      for (int64_t v0 = lane; v0 < nvec; v0 += 32 * kGateUpB) {
        Vec<T> wg[kGateUpB], wu[kGateUpB];
#pragma unroll
        for (int b = 0; b < kGateUpB; ++b) {  // all 2 * kGateUpB loads issued before any use
          const int64_t v = v0 + 32 * b;
          wg[b].raw = wu[b].raw = make_uint4(0, 0, 0, 0);
          if (v < nvec) {
            wg[b] = load_vec<T, kVec>(gw, v, hidden);
            wu[b] = load_vec<T, kVec>(uw, v, hidden);
          }
        }
#pragma unroll
        for (int b = 0; b < kGateUpB; ++b) {  // vector-major: one vector's weights as floats at a time
          const int64_t v = v0 + 32 * b;
          if (v >= nvec) break;
#pragma unroll
          for (int s = 0; s < kS; ++s) {
            if (s >= cnt) break;
            const Vec<T> xv = load_vec<T, kVec>(x + (t0 + g.order[sp + s] / k) * hidden, v, hidden);
#pragma unroll
            for (int e = 0; e < kN; ++e) {
              ag[s] += to_f(wg[b].v[e]) * to_f(xv.v[e]);
              au[s] += to_f(wu[b].v[e]) * to_f(xv.v[e]);
            }
          }
        }
      }
#pragma unroll
      for (int s = 0; s < kS; ++s) {
        if (s >= cnt) break;
        const float gs = warp_sum(ag[s]), us = warp_sum(au[s]);
        if (lane == 0) {  // silu_and_mul's element (or the clamped SwiGLU) of round(g), round(u), rounded
          const T* b = static_cast<const T*>(ex.gate_up_b);  // [E, 2 * inter] or null
          const int64_t b0 = static_cast<int64_t>(g.expert[eu]) * 2 * inter + i;
          const float gf = add_bias(to_f(from_f<T>(gs)), b, b0), uf = add_bias(to_f(from_f<T>(us)), b, b0 + inter);
          act[(t0 * k + g.order[sp + s]) * inter + i] = from_f<T>(moe_glu(gf, uf, ex.alpha, ex.limit));
        }
      }
    }
  }
}

// grid: (ceil(hidden / cols), ceil(T / kGroupTokens)); block columns j0 + [0, cols), cols even, <= 8.
// Unit u: distinct expert u / (cols / 2), columns j0 + 2 (u % (cols / 2)) + [0, 2): 2 adjacent rows of
// down_e ([I] each; the block's rows of an expert are one contiguous range, 12 KB for 8 columns at
// I = 768), kDownB vectors of each a lane in flight
// (2 x 3 = 6 at I = 768: 3 KB a warp), dotted with the act rows of the expert's slots. y goes to shared
// memory ys[sorted position][column]; then thread (token, column) sums its k slots.
// (4 rows a unit spilled registers in bf16; 2 rows and 3 blocks an SM keep ~72 KB an SM in flight.)
template <typename T, bool kVec, int kS>
__global__ void __launch_bounds__(kDecThreads, blocks_per_sm(kS))
    moe_down_decode_kernel(const T* act, const T* w, const int* ids, const float* weights, int64_t tokens, int k,
                           int64_t hidden, int64_t inter, int cols, bool prefetch, const T* down_b, T* out) {
  constexpr int kN = Vec<T>::kN;
  const int units = cols / kDownUnitRows;
  __shared__ Group g;
  __shared__ float ys[kMaxSlots][kDownRows];
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * kGroupTokens;
  const int nt = static_cast<int>(min(static_cast<int64_t>(kGroupTokens), tokens - t0));
  const int64_t j0 = static_cast<int64_t>(blockIdx.x) * cols;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t nvec = (inter + kN - 1) / kN;
  // 1. Before the wait (header): the sort, and the block's first rows (ascending expert, the order the
  // units are taken in) into L2; each expert's rows of the block are one contiguous range.
  build_group(g, ids + t0 * k, nt * k, k);
  {  // the 128-byte lines holding each expert's range (none past it)
    const int64_t rows = min(static_cast<int64_t>(cols), hidden - j0);
    const int64_t bytes = rows * inter * static_cast<int64_t>(sizeof(T));
    const int64_t total_lines = static_cast<int64_t>(g.nexp) * ((bytes + 127) / 128 + 1);
    const int64_t total = min(total_lines, static_cast<int64_t>(kDownPrefetchLines));
    for (int64_t q = threadIdx.x; q < total; q += kDecThreads) {
      const int64_t per = (bytes + 127) / 128 + 1, eu = q / per, l = q - eu * per;
      const uintptr_t a = reinterpret_cast<uintptr_t>(w + (g.expert[eu] * hidden + j0) * inter);
      const uintptr_t line = (a & ~uintptr_t{127}) + static_cast<uintptr_t>(l) * 128;
      if (line < a + bytes) prefetch_l2(reinterpret_cast<const void*>(line));
    }
  }
  pdl_enter();  // act from gate_up
  for (int u = warp; u < g.nexp * units; u += kDecWarps) {
    const int eu = u / units, c0 = (u % units) * kDownUnitRows;  // first column of the unit in the block
    const int nrows = static_cast<int>(min(static_cast<int64_t>(kDownUnitRows), hidden - j0 - c0));
    if (nrows <= 0) continue;
    const T* wr = w + (static_cast<int64_t>(g.expert[eu]) * hidden + j0 + c0) * inter;  // row q: wr + q * inter
    if (prefetch && u + kDecWarps < g.nexp * units) {  // the warp's next unit into L2 while this one streams
      const int nu = u + kDecWarps, nc0 = (nu % units) * kDownUnitRows;
      const int64_t nr = min(static_cast<int64_t>(kDownUnitRows), hidden - j0 - nc0);
      if (nr > 0)
        prefetch_range_l2(w + (static_cast<int64_t>(g.expert[nu / units]) * hidden + j0 + nc0) * inter,
                          nr * inter * static_cast<int64_t>(sizeof(T)), lane);
    }
    const int end = g.start[eu + 1];
    for (int sp = g.start[eu]; sp < end; sp += kS) {
      const int cnt = min(kS, end - sp);
      float acc[kDownUnitRows][kS];
#pragma unroll
      for (int q = 0; q < kDownUnitRows; ++q)
#pragma unroll
        for (int s = 0; s < kS; ++s) acc[q][s] = 0.f;
      for (int64_t v0 = lane; v0 < nvec; v0 += 32 * kDownB) {
        Vec<T> wv[kDownUnitRows][kDownB];
#pragma unroll
        for (int q = 0; q < kDownUnitRows; ++q)
#pragma unroll
          for (int b = 0; b < kDownB; ++b) {
            const int64_t v = v0 + 32 * b;
            wv[q][b].raw = make_uint4(0, 0, 0, 0);
            if (q < nrows && v < nvec) wv[q][b] = load_vec<T, kVec>(wr + q * inter, v, inter);
          }
#pragma unroll
        for (int b = 0; b < kDownB; ++b) {
          const int64_t v = v0 + 32 * b;
          if (v >= nvec) break;
#pragma unroll
          for (int s = 0; s < kS; ++s) {
            if (s >= cnt) break;
            const Vec<T> av = load_vec<T, kVec>(act + (t0 * k + g.order[sp + s]) * inter, v, inter);
#pragma unroll
            for (int q = 0; q < kDownUnitRows; ++q)
#pragma unroll
              for (int e = 0; e < kN; ++e) acc[q][s] += to_f(wv[q][b].v[e]) * to_f(av.v[e]);
          }
        }
      }
#pragma unroll
      for (int s = 0; s < kS; ++s) {
        if (s >= cnt) break;
#pragma unroll
        for (int q = 0; q < kDownUnitRows; ++q) {
          const float y = warp_sum(acc[q][s]);
          if (lane == 0) ys[sp + s][c0 + q] = y;
        }
      }
    }
  }
  __syncthreads();
  // 2. Thread (token m, column c): the k slots in ascending expert id, the former down kernel's sum;
  // down_b [E, hidden] (or null) added to each rounded y.
  for (int i = threadIdx.x; i < nt * cols; i += kDecThreads) {
    const int m = i / cols, c = i % cols;
    if (j0 + c >= hidden) continue;
    float acc = 0.f;
    for (int r = 0; r < k; ++r) {
      const int j = g.tok_order[m * k + r];
      const float y = add_bias(to_f(from_f<T>(ys[g.pos[j]][c])), down_b, g.id[j] * hidden + j0 + c);
      acc = to_f(from_f<T>(acc + to_f(from_f<T>(y * weights[t0 * k + j]))));
    }
    out[(t0 + m) * hidden + j0 + c] = from_f<T>(acc);
  }
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// VIREO_MOE_DECODE_PREFETCH=0: no L2 prefetch of a warp's next unit (A/B runs).
bool unit_prefetch() {
  static const bool on = [] {
    const char* e = std::getenv("VIREO_MOE_DECODE_PREFETCH");
    return e == nullptr || e[0] != '0';
  }();
  return on;
}

// Blocks resident at once: SMs x blocks an SM (the kernels' launch bounds; shared memory allows it).
int64_t resident_blocks(int share) {
  int dev = 0, sms = 0;
  VIREO_CUDA_CHECK(cudaGetDevice(&dev));
  VIREO_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return int64_t{sms} * blocks_per_sm(share);
}

// Work per block sized so one group's blocks fit in one wave where the rows allow (a second, partial
// wave would stream with a fraction of the SMs). H200, 132 SMs, Qwen3-30B-A3B: gate_up T = 1 (396
// resident) 2 indices a block, 384 blocks; T > 1 (264 resident) 3, 256 blocks. down T = 1: 6 columns,
// 342 blocks; T > 1: 8 columns, 256 blocks.
int gate_up_rows(int64_t inter, int share) {
  const int64_t r = (inter + resident_blocks(share) - 1) / resident_blocks(share);
  return static_cast<int>(std::max<int64_t>(r, 1));
}
int down_cols(int64_t hidden, int share) {
  int64_t c = (hidden + resident_blocks(share) - 1) / resident_blocks(share);
  c = (c + 1) / 2 * 2;
  return static_cast<int>(std::clamp<int64_t>(c, 2, kDownRows));
}

}  // namespace

void launch_moe_gate_up_decode(DType dt, const void* x, const void* gate_up_w, const int* ids, int64_t tokens,
                               int top_k, int64_t hidden, int64_t inter, void* act, cudaStream_t stream,
                               const MoeExtras& extras) {
  if (top_k < 1 || top_k > kMaxTopK) throw Error("cuda moe gate_up decode: top_k out of range");
  if (tokens == 0) return;
  if ((tokens + kGroupTokens - 1) / kGroupTokens > 65535) throw Error("cuda moe decode: too many tokens");
  const int rows = gate_up_rows(inter, tokens == 1 ? 1 : kShareMany);
  const dim3 grid(static_cast<unsigned>((inter + rows - 1) / rows),
                  static_cast<unsigned>((tokens + kGroupTokens - 1) / kGroupTokens));
  dispatch_float(dt, "moe gate_up decode", [&](auto tag) {
    using T = decltype(tag);
    const bool vec = hidden % Vec<T>::kN == 0 && aligned16(x) && aligned16(gate_up_w);
    auto args = [&](auto kernel) {
      launch_pdl(kernel, grid, dim3(kDecThreads), 0, stream, static_cast<const T*>(x), static_cast<const T*>(gate_up_w),
                 ids, tokens, top_k, hidden, inter, rows, unit_prefetch(), extras, static_cast<T*>(act));
    };
    if (vec && tokens == 1) args(moe_gate_up_decode_kernel<T, true, 1>);
    else if (vec) args(moe_gate_up_decode_kernel<T, true, kShareMany>);
    else args(moe_gate_up_decode_kernel<T, false, kShareMany>);
  });
  check_launch("moe gate_up decode");
}

void launch_moe_down_decode(DType dt, const void* act, const void* down_w, const int* ids, const float* weights,
                            int64_t tokens, int top_k, int64_t hidden, int64_t inter, void* out, cudaStream_t stream,
                            const MoeExtras& extras) {
  if (top_k < 1 || top_k > kMaxTopK) throw Error("cuda moe down decode: top_k out of range");
  if (tokens == 0) return;
  if ((tokens + kGroupTokens - 1) / kGroupTokens > 65535) throw Error("cuda moe decode: too many tokens");
  const int cols = down_cols(hidden, tokens == 1 ? 1 : kShareMany);
  const dim3 grid(static_cast<unsigned>((hidden + cols - 1) / cols),
                  static_cast<unsigned>((tokens + kGroupTokens - 1) / kGroupTokens));
  dispatch_float(dt, "moe down decode", [&](auto tag) {
    using T = decltype(tag);
    const bool vec = inter % Vec<T>::kN == 0 && aligned16(act) && aligned16(down_w);
    auto args = [&](auto kernel) {
      launch_pdl(kernel, grid, dim3(kDecThreads), 0, stream, static_cast<const T*>(act), static_cast<const T*>(down_w),
                 ids, weights, tokens, top_k, hidden, inter, cols, unit_prefetch(),
                 static_cast<const T*>(extras.down_b), static_cast<T*>(out));
    };
    if (vec && tokens == 1) args(moe_down_decode_kernel<T, true, 1>);
    else if (vec) args(moe_down_decode_kernel<T, true, kShareMany>);
    else args(moe_down_decode_kernel<T, false, kShareMany>);
  });
  check_launch("moe down decode");
}

}  // namespace vireo::cuda
