// Grouped MoE, steps 2 and 3 (moe.h): per-expert GEMMs over the slots sorted by expert, on tensor cores.
//
// One block per (tile, column block): a tile is up to 128 sorted rows of one expert (moe_sort.cu), so
// the block computes A [rows, K] x B_e [128 weight rows, K]^T with B_e the expert's weight rows:
//   gate_up: A = the tile's tokens' rows of x (gathered, K = hidden); B = 64 gate rows and the 64 up
//            rows of the same intermediate columns (i0 + [0, 64)), so a thread holds gate and up of its
//            outputs: act[r, i] = round(moe_glu(round(g), round(u))) (silu(g) * u or the clamped SwiGLU;
//            with gate_up_b each of g, u is round(. + bias) again), act [S, inter] in sorted order.
//   down:    A = act rows (contiguous, K = inter); B = 128 rows of down_e (output columns j0 + [0, 128)):
//            y[r, j] = round(act[r] . down_e[j]) (round(that + b_down[e, j]) with down_b), y [S, hidden]
//            in sorted order.
// The epilogues are the per-slot kernels' (moe_decode.cu) expression for expression.
// Main loop (as gemm_invariant.cu's): 64-wide k tiles gathered with cp.async three stages deep into
// padded shared memory (row stride 72 elements, 144 bytes: ldmatrix rows conflict-free), ldmatrix +
// mma.sync m16n8k16 with fp32 accumulators; zero-filled past the tile's rows, N and K (K % 8 == 0).
// 8 warps as 2 (rows) x 4 (columns), each 64 rows x 32 weight rows (4 x 4 m16n8 tiles, 64 fp32
// accumulators per thread); a warp skips the 16-row m-tiles past the tile's rows (experts with few slots
// cost little tensor time). Two blocks per SM (108 KiB of shared memory each).
// Grid x runs over tiles (fastest), so the tiles of one expert run side by side and share its weight
// tiles through L2; blocks past the tile count the sort found exit at once (grid from the host bound).
#include "backend/cuda/activation.cuh"
#include "backend/cuda/attention_mma_common.cuh"
#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_types.cuh"
#include "backend/cuda/moe.h"
#include "backend/cuda/mxfp4.cuh"

namespace vireo::cuda {
namespace {

constexpr int kGgM = kMoeTileRows;  // 128 sorted rows per tile
constexpr int kGgN = 128;           // weight rows per block
constexpr int kGgK = 64;            // k per pipeline stage
constexpr int kGgLd = kGgK + 8;     // shared row stride (elements)
constexpr int kGgStages = 3;
constexpr int kGgThreads = 256;
constexpr int kGgMT = 4, kGgNT = 4;                  // m16 / n8 tiles per warp (64 x 32)
constexpr int kGgLoads = kGgM * (kGgK / 8) / kGgThreads;  // 16-byte chunks per thread, operand and stage
static_assert(kGgM == kGgN && kGgLoads == 4 && kGgThreads / 8 * kGgLoads == kGgM, "loader: rows tid / 8 + 32 i");

template <typename T>
struct GgSmem {
  T a[kGgStages][kGgM][kGgLd];
  T b[kGgStages][kGgN][kGgLd];
};
constexpr size_t kGgSmemBytes = sizeof(GgSmem<__nv_bfloat16>);  // 110,592

// acc += one 64-wide k tile: a [kGgM][kGgLd] (this warp's rows wm * 64 + ..), b [kGgN][kGgLd] (n8 tiles
// from b_base), both in shared memory.
template <typename T>
__device__ __forceinline__ void gg_mma_ktile(const T (*a)[kGgLd], const T (*b)[kGgLd], int live_mt,
                                             const int (&b_base)[2], float (&acc)[kGgMT][kGgNT][4]) {
  const int lane = threadIdx.x % 32, wm = threadIdx.x / 32 / 4;
#pragma unroll
  for (int kk = 0; kk < kGgK; kk += 16) {
    unsigned af[kGgMT][4];
#pragma unroll
    for (int mt = 0; mt < kGgMT; ++mt)
      if (mt < live_mt) ldmatrix_x4(af[mt], &a[wm * 64 + mt * 16 + lane % 16][kk + (lane / 16) * 8]);
#pragma unroll
    for (int p = 0; p < 2; ++p) {
      unsigned bf[4];
      ldmatrix_x4(bf, &b[b_base[p] + lane % 8 + (lane / 16) * 8][kk + ((lane / 8) % 2) * 8]);
#pragma unroll
      for (int mt = 0; mt < kGgMT; ++mt)
        if (mt < live_mt) {
          mma16816<T>(acc[mt][2 * p], af[mt], bf[0], bf[1]);
          mma16816<T>(acc[mt][2 * p + 1], af[mt], bf[2], bf[3]);
        }
    }
  }
}

// acc += A x B^T over k in [0, K). Thread tid copies rows tid / 8 + 32 i (i < 4) of both tiles, 16
// bytes at column (tid % 8) * 8 of each k tile, from a_row[i] / b_row[i] (nullptr: a zero row); `dummy`
// is any valid address (a zero-fill copy reads nothing). live_mt: this warp's m16 tiles holding rows;
// b_base[p]: first shared B row of the warp's n8 tiles 2p and 2p + 1.
template <typename T>
__device__ __forceinline__ void gg_mainloop(GgSmem<T>& sm, const T* const (&a_row)[kGgLoads],
                                            const T* const (&b_row)[kGgLoads], const T* dummy, int64_t K, int live_mt,
                                            const int (&b_base)[2], float (&acc)[kGgMT][kGgNT][4]) {
  const int r0 = threadIdx.x / 8, col = (threadIdx.x % 8) * 8;
  const int ktiles = static_cast<int>((K + kGgK - 1) / kGgK);
  auto load = [&](int kt, int st) {
    const int64_t k = static_cast<int64_t>(kt) * kGgK + col;
    const bool kin = k < K;  // K % 8 == 0: a chunk is wholly in or out
#pragma unroll
    for (int i = 0; i < kGgLoads; ++i) {
      const bool ok = kin && a_row[i] != nullptr;
      cp_async16(&sm.a[st][r0 + 32 * i][col], ok ? a_row[i] + k : dummy, ok);
    }
#pragma unroll
    for (int i = 0; i < kGgLoads; ++i) {
      const bool ok = kin && b_row[i] != nullptr;
      cp_async16(&sm.b[st][r0 + 32 * i][col], ok ? b_row[i] + k : dummy, ok);
    }
  };
#pragma unroll
  for (int mt = 0; mt < kGgMT; ++mt)
#pragma unroll
    for (int nt = 0; nt < kGgNT; ++nt) acc[mt][nt][0] = acc[mt][nt][1] = acc[mt][nt][2] = acc[mt][nt][3] = 0.f;
#pragma unroll
  for (int st = 0; st < kGgStages - 1; ++st) {
    if (st < ktiles) load(st, st);
    cp_async_commit();
  }
  for (int kt = 0; kt < ktiles; ++kt) {
    cp_async_wait<kGgStages - 2>();  // tile kt landed (this thread's copies) ...
    __syncthreads();                 // ... everyone's, and nobody still reads the stage refilled next
    if (kt + kGgStages - 1 < ktiles) load(kt + kGgStages - 1, (kt + kGgStages - 1) % kGgStages);
    cp_async_commit();
    if (live_mt == 0) continue;  // warp-uniform: this warp's rows are all past the tile's
    const int st = kt % kGgStages;
    gg_mma_ktile<T>(sm.a[st], sm.b[st], live_mt, b_base, acc);
  }
  cp_async_wait<0>();
}

// MXFP4 B (bf16 only): the packed k tiles (32 bytes a row) come in by cp.async three stages deep; thread
// tid owns B row tid / 2, 32-element block tid % 2 of each k tile: it copies those 16 bytes, and when the
// tile has landed dequantizes them (with the block's scale, loaded into a register two tiles ahead)
// into the one bf16 B tile the warps' ldmatrix read. One more barrier a k tile than the dense loop;
// 4x fewer weight bytes.
struct GgSmemFp4 {
  __nv_bfloat16 a[kGgStages][kGgM][kGgLd];
  __nv_bfloat16 b[kGgN][kGgLd];            // this k tile's B, dequantized
  uint8_t raw[kGgStages][kGgN][kGgK / 2];  // packed B k tiles in flight
};
constexpr size_t kGgSmemBytesFp4 = sizeof(GgSmemFp4);  // 86,016

// b_bytes / b_scales: this thread's B row (tid / 2) packed and its E8M0 scales; nullptr: a zero row.
__device__ __forceinline__ void gg_mainloop_fp4(GgSmemFp4& sm, const __nv_bfloat16* const (&a_row)[kGgLoads],
                                                const uint8_t* b_bytes, const uint8_t* b_scales, const void* dummy,
                                                int64_t K, int live_mt, const int (&b_base)[2],
                                                float (&acc)[kGgMT][kGgNT][4]) {
  const int r0 = threadIdx.x / 8, col = (threadIdx.x % 8) * 8;
  const int br = threadIdx.x / 2, bh = threadIdx.x % 2;
  const int64_t nblk = K / 32;
  const int ktiles = static_cast<int>((K + kGgK - 1) / kGgK);
  auto load = [&](int kt, int st) {
    const int64_t k = static_cast<int64_t>(kt) * kGgK + col;
    const bool kin = k < K;
#pragma unroll
    for (int i = 0; i < kGgLoads; ++i) {
      const bool ok = kin && a_row[i] != nullptr;
      cp_async16(&sm.a[st][r0 + 32 * i][col], ok ? a_row[i] + k : dummy, ok);
    }
    const int64_t blk = static_cast<int64_t>(kt) * 2 + bh;
    const bool ok = b_bytes != nullptr && blk < nblk;
    cp_async16(&sm.raw[st][br][bh * 16], ok ? b_bytes + blk * 16 : dummy, ok);
  };
  auto scale = [&](int kt) -> unsigned {
    const int64_t blk = static_cast<int64_t>(kt) * 2 + bh;
    return b_scales != nullptr && blk < nblk ? __ldg(b_scales + blk) : 127u;
  };
#pragma unroll
  for (int mt = 0; mt < kGgMT; ++mt)
#pragma unroll
    for (int nt = 0; nt < kGgNT; ++nt) acc[mt][nt][0] = acc[mt][nt][1] = acc[mt][nt][2] = acc[mt][nt][3] = 0.f;
#pragma unroll
  for (int st = 0; st < kGgStages - 1; ++st) {
    if (st < ktiles) load(st, st);
    cp_async_commit();
  }
  unsigned s_now = scale(0), s_next = scale(1);  // scales of tiles kt and kt + 1
  for (int kt = 0; kt < ktiles; ++kt) {
    cp_async_wait<kGgStages - 2>();  // tile kt landed (this thread's copies) ...
    __syncthreads();                 // ... everyone's; nobody still reads sm.b or the stage refilled next
    if (kt + kGgStages - 1 < ktiles) load(kt + kGgStages - 1, (kt + kGgStages - 1) % kGgStages);
    cp_async_commit();
    {  // this thread's 32 elements of B, from its own copy
      unsigned v[16];
      fp4_block_to_bf16(*reinterpret_cast<const uint4*>(&sm.raw[kt % kGgStages][br][bh * 16]), s_now, v);
      uint4* dst = reinterpret_cast<uint4*>(&sm.b[br][bh * 32]);
#pragma unroll
      for (int q = 0; q < 4; ++q) dst[q] = make_uint4(v[4 * q], v[4 * q + 1], v[4 * q + 2], v[4 * q + 3]);
    }
    s_now = s_next;  // loaded a whole tile ago
    s_next = scale(kt + 2);
    __syncthreads();  // the dequantized tile complete
    if (live_mt == 0) continue;
    gg_mma_ktile<__nv_bfloat16>(sm.a[kt % kGgStages], sm.b, live_mt, b_base, acc);
  }
  cp_async_wait<0>();
}

// round(v + bias[i]) when bias is given, else v: moe_decode.cu's add_bias.
template <typename T>
__device__ __forceinline__ float add_bias(float v, const T* bias, int64_t i) {
  return bias ? to_f(from_f<T>(v + to_f(bias[i]))) : v;
}

// 16-row m-tiles of warp row wm (rows wm * 64 + [0, 64)) that hold some of the tile's `rows` rows.
__device__ __forceinline__ int live_m_tiles(int rows, int wm) { return min(kGgMT, max(0, (rows - wm * 64 + 15) / 16)); }

// grid: (max_tiles, ceil(inter / 64)).
// kFp4: w packed MXFP4 with scales w_s (bf16 only), else w in T and w_s unused.
template <typename T, bool kFp4>
__global__ void __launch_bounds__(kGgThreads, 2)
    moe_gate_up_grouped_kernel(const T* x, const void* w, const uint8_t* w_s, const int* sorted_slot, int top_k,
                               const MoeTile* tiles, const int* num_tiles, int64_t hidden, int64_t inter, MoeExtras ex,
                               T* act) {
  extern __shared__ __align__(16) unsigned char gg_smem[];
  pdl_enter();  // x, the sorted slots and the tiles come from earlier kernels
  if (static_cast<int>(blockIdx.x) >= *num_tiles) return;
  const MoeTile tile = tiles[blockIdx.x];
  const int64_t i0 = static_cast<int64_t>(blockIdx.y) * (kGgN / 2);
  const T* a_row[kGgLoads];
#pragma unroll
  for (int i = 0; i < kGgLoads; ++i) {
    const int r = threadIdx.x / 8 + 32 * i;
    a_row[i] = r < tile.rows ? x + static_cast<int64_t>(sorted_slot[tile.row0 + r] / top_k) * hidden : nullptr;
  }
  // Weight row of shared B row r: [0, 64) gate rows, [64, 128) the up rows of the same columns; -1: none.
  auto w_row = [&](int r) -> int64_t {
    const int64_t c = i0 + r % 64;
    return c < inter ? static_cast<int64_t>(tile.expert) * 2 * inter + (r < 64 ? 0 : inter) + c : -1;
  };
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, wm = warp / 4, wn = warp % 4;
  const int live_mt = live_m_tiles(tile.rows, wm);
  const int b_base[2] = {wn * 16, 64 + wn * 16};  // n8 tiles 0, 1: gate; 2, 3: up of the same columns
  float acc[kGgMT][kGgNT][4];
  if constexpr (kFp4) {
    const int64_t row = w_row(threadIdx.x / 2);
    const uint8_t* wb = static_cast<const uint8_t*>(w);
    gg_mainloop_fp4(*reinterpret_cast<GgSmemFp4*>(gg_smem), a_row, row < 0 ? nullptr : wb + row * (hidden / 2),
                    row < 0 ? nullptr : w_s + row * (hidden / 32), w, hidden, live_mt, b_base, acc);
  } else {
    const T* b_row[kGgLoads];
#pragma unroll
    for (int i = 0; i < kGgLoads; ++i) {
      const int64_t row = w_row(threadIdx.x / 8 + 32 * i);
      b_row[i] = row < 0 ? nullptr : static_cast<const T*>(w) + row * hidden;
    }
    gg_mainloop<T>(*reinterpret_cast<GgSmem<T>*>(gg_smem), a_row, b_row, static_cast<const T*>(w), hidden, live_mt,
                   b_base, acc);
  }
  // Accumulator layout: c0, c1 at (row g, columns 2 tq, 2 tq + 1); c2, c3 at row g + 8.
  const int g = lane / 4, tq = lane % 4;
  const T* bias = ex.gate_up_b ? static_cast<const T*>(ex.gate_up_b) + static_cast<int64_t>(tile.expert) * 2 * inter
                               : nullptr;  // expert's [gate biases | up biases] or null
#pragma unroll
  for (int mt = 0; mt < kGgMT; ++mt)
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = wm * 64 + mt * 16 + g + h * 8;
        const int64_t c = i0 + wn * 16 + nt * 8 + 2 * tq;  // inter % 8 == 0: c + 1 < inter too
        if (mt >= live_mt || row >= tile.rows || c >= inter) continue;
        float v[2];
#pragma unroll
        for (int q = 0; q < 2; ++q) {
          const float gf = add_bias(to_f(from_f<T>(acc[mt][nt][2 * h + q])), bias, c + q);
          const float uf = add_bias(to_f(from_f<T>(acc[mt][nt + 2][2 * h + q])), bias, inter + c + q);
          v[q] = moe_glu(gf, uf, ex.alpha, ex.limit);  // the per-slot kernel's expression
        }
        *reinterpret_cast<unsigned*>(act + static_cast<int64_t>(tile.row0 + row) * inter + c) = pack2<T>(v[0], v[1]);
      }
}

// grid: (max_tiles, ceil(hidden / 128)).
template <typename T, bool kFp4>
__global__ void __launch_bounds__(kGgThreads, 2)
    moe_down_grouped_kernel(const T* act, const void* w, const uint8_t* w_s, const MoeTile* tiles, const int* num_tiles,
                            int64_t hidden, int64_t inter, const T* down_b, T* y) {
  extern __shared__ __align__(16) unsigned char gg_smem[];
  pdl_enter();  // act comes from the gate_up kernel
  if (static_cast<int>(blockIdx.x) >= *num_tiles) return;
  const MoeTile tile = tiles[blockIdx.x];
  const int64_t j0 = static_cast<int64_t>(blockIdx.y) * kGgN;
  const T* a_row[kGgLoads];
#pragma unroll
  for (int i = 0; i < kGgLoads; ++i) {
    const int r = threadIdx.x / 8 + 32 * i;
    a_row[i] = r < tile.rows ? act + static_cast<int64_t>(tile.row0 + r) * inter : nullptr;
  }
  auto w_row = [&](int r) -> int64_t {  // weight row of shared B row r (output column j0 + r); -1: none
    return j0 + r < hidden ? static_cast<int64_t>(tile.expert) * hidden + j0 + r : -1;
  };
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, wm = warp / 4, wn = warp % 4;
  const int live_mt = live_m_tiles(tile.rows, wm);
  const int b_base[2] = {wn * 32, wn * 32 + 16};
  float acc[kGgMT][kGgNT][4];
  if constexpr (kFp4) {
    const int64_t row = w_row(threadIdx.x / 2);
    const uint8_t* wb = static_cast<const uint8_t*>(w);
    gg_mainloop_fp4(*reinterpret_cast<GgSmemFp4*>(gg_smem), a_row, row < 0 ? nullptr : wb + row * (inter / 2),
                    row < 0 ? nullptr : w_s + row * (inter / 32), w, inter, live_mt, b_base, acc);
  } else {
    const T* b_row[kGgLoads];
#pragma unroll
    for (int i = 0; i < kGgLoads; ++i) {
      const int64_t row = w_row(threadIdx.x / 8 + 32 * i);
      b_row[i] = row < 0 ? nullptr : static_cast<const T*>(w) + row * inter;
    }
    gg_mainloop<T>(*reinterpret_cast<GgSmem<T>*>(gg_smem), a_row, b_row, static_cast<const T*>(w), inter, live_mt,
                   b_base, acc);
  }
  const int g = lane / 4, tq = lane % 4;
  const T* bias = down_b ? down_b + static_cast<int64_t>(tile.expert) * hidden : nullptr;  // [hidden] or null
#pragma unroll
  for (int mt = 0; mt < kGgMT; ++mt)
#pragma unroll
    for (int nt = 0; nt < kGgNT; ++nt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = wm * 64 + mt * 16 + g + h * 8;
        const int64_t j = j0 + wn * 32 + nt * 8 + 2 * tq;  // hidden % 8 == 0: j + 1 < hidden too
        if (mt >= live_mt || row >= tile.rows || j >= hidden) continue;
        float v[2] = {acc[mt][nt][2 * h], acc[mt][nt][2 * h + 1]};
        if (bias)  // round(round(y) + b) (pack2's rounding then exact)
#pragma unroll
          for (int q = 0; q < 2; ++q) v[q] = add_bias(to_f(from_f<T>(v[q])), bias, j + q);
        *reinterpret_cast<unsigned*>(y + static_cast<int64_t>(tile.row0 + row) * hidden + j) = pack2<T>(v[0], v[1]);
      }
}

// Up to 108 KiB of dynamic shared memory (`bytes`), and the carveout that lets two blocks share an SM; once
// per kernel (the first call of a shape runs before any capture uses it).
template <typename Kernel>
void gg_prepare(Kernel kernel, size_t bytes) {
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
        "moe grouped gemm: cudaFuncSetAttribute");
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared),
        "moe grouped gemm: cudaFuncSetAttribute");
}

void check_grid(int64_t max_tiles, int64_t col_blocks) {
  if (max_tiles < 1 || max_tiles > 0x7fffffff || col_blocks < 1 || col_blocks > 65535)
    throw Error("cuda moe grouped gemm: grid out of range");
}

// Weights packed (MXFP4, bf16 activations, dims multiples of 32) when w_scales is given.
void check_fp4(DType dt, const void* w_scales, int64_t hidden, int64_t inter) {
  if (w_scales != nullptr && (dt != DType::kBF16 || hidden % 32 != 0 || inter % 32 != 0))
    throw Error("cuda moe grouped gemm: MXFP4 weights need bf16 activations and dims that are multiples of 32");
}

// Sets the kernel up once (gg_prepare) and launches it with kGg threads. The kernel is a template
// argument so that each kernel has its own `ready`: the dense and MXFP4 instantiations share one
// signature, and a static keyed on the signature prepared only whichever ran first (the other then
// failed to launch with its 110 / 86 KB of shared memory).
template <auto kKernel, typename... Args>
void gg_run(size_t smem, dim3 grid, cudaStream_t stream, Args&&... args) {
  static const bool ready = (gg_prepare(kKernel, smem), true);
  (void)ready;
  launch_pdl(kKernel, grid, dim3(kGgThreads), smem, stream, std::forward<Args>(args)...);
}

}  // namespace

void launch_moe_gate_up_grouped(DType dt, const void* x, const void* gate_up_w, const int* sorted_slot, int top_k,
                                const MoeTile* tiles, const int* num_tiles, int64_t max_tiles, int64_t hidden,
                                int64_t inter, void* act, cudaStream_t stream, const MoeExtras& extras,
                                const void* w_scales) {
  const int64_t col_blocks = (inter + kGgN / 2 - 1) / (kGgN / 2);
  check_grid(max_tiles, col_blocks);
  check_fp4(dt, w_scales, hidden, inter);
  const dim3 grid(static_cast<unsigned>(max_tiles), static_cast<unsigned>(col_blocks));
  const auto* s = static_cast<const uint8_t*>(w_scales);
  dispatch_float(dt, "moe gate_up grouped", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float>) {
      throw Error("cuda moe grouped gemm: bf16 / f16 only");
    } else {
      const T* xt = static_cast<const T*>(x);
      T* out = static_cast<T*>(act);
      if constexpr (std::is_same_v<T, __nv_bfloat16>)
        if (s != nullptr)
          return gg_run<moe_gate_up_grouped_kernel<T, true>>(kGgSmemBytesFp4, grid, stream, xt, gate_up_w, s,
                        sorted_slot, top_k, tiles, num_tiles, hidden, inter, extras, out);
      gg_run<moe_gate_up_grouped_kernel<T, false>>(kGgSmemBytes, grid, stream, xt, gate_up_w, s, sorted_slot, top_k,
             tiles, num_tiles, hidden, inter, extras, out);
    }
  });
  check_launch("moe gate_up grouped");
}

void launch_moe_down_grouped(DType dt, const void* act, const void* down_w, const MoeTile* tiles, const int* num_tiles,
                             int64_t max_tiles, int64_t hidden, int64_t inter, void* y, cudaStream_t stream,
                             const MoeExtras& extras, const void* w_scales) {
  const int64_t col_blocks = (hidden + kGgN - 1) / kGgN;
  check_grid(max_tiles, col_blocks);
  check_fp4(dt, w_scales, hidden, inter);
  const dim3 grid(static_cast<unsigned>(max_tiles), static_cast<unsigned>(col_blocks));
  const auto* s = static_cast<const uint8_t*>(w_scales);
  dispatch_float(dt, "moe down grouped", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float>) {
      throw Error("cuda moe grouped gemm: bf16 / f16 only");
    } else {
      const T* a = static_cast<const T*>(act);
      const T* b = static_cast<const T*>(extras.down_b);
      T* out = static_cast<T*>(y);
      if constexpr (std::is_same_v<T, __nv_bfloat16>)
        if (s != nullptr)
          return gg_run<moe_down_grouped_kernel<T, true>>(kGgSmemBytesFp4, grid, stream, a, down_w, s, tiles, num_tiles,
                        hidden, inter, b, out);
      gg_run<moe_down_grouped_kernel<T, false>>(kGgSmemBytes, grid, stream, a, down_w, s, tiles, num_tiles, hidden,
             inter, b, out);
    }
  });
  check_launch("moe down grouped");
}

}  // namespace vireo::cuda
