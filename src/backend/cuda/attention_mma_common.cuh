// Shared pieces of the tensor-core paged attention kernels (attention_mma.cu): tile constants,
// the kernel argument struct, and the cp.async / ldmatrix / mma.sync wrappers.
#pragma once
#include <type_traits>

#include "backend/cuda/cuda_types.cuh"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/qkv_head.cuh"

namespace vireo::cuda {
namespace {

constexpr int kBN = 64;       // keys per tile
constexpr int kThreads = 128; // 4 warps
constexpr int kPad = 8;       // elements of padding per smem row: conflict-free ldmatrix
constexpr int kStages = 3;    // K/V tiles in flight: two loading while one is computed

struct MmaArgs {
  const void* q;
  const void* k_cache;
  const void* v_cache;
  void* out;
  const int* query_start;
  const int* seq_lens;
  const int* block_tables;
  float* ws_o;     // [T, H, max_splits, D] unnormalised partial outputs
  float2* ws_ml;   // [T, H, max_splits] (running max in log2 units, sum of exp)
  int num_seqs, max_blocks_per_seq, block_size, num_heads, num_kv_heads, group;
  int block_shift;  // log2(block_size) when it is a power of two, else -1 (kernels that need it check)
  float scale_log2;  // softmax scale * log2(e)
  int split_len_decode, split_len_prefill;
  int splits_decode, splits_prefill;  // grid z of each shape's launch: a sequence never uses more splits
  int max_splits;                     // workspace stride: max(splits_decode, splits_prefill)
  // Decode shape only: arrival counters, one per (seq, kv head) = blockIdx.y, all zero between launches.
  // The last split block of a (seq, kv head) to finish merges its splits and resets the counter to zero;
  // nullptr: the merge kernel merges the decode splits instead.
  unsigned* counters;
  // Decode shape only, fused mode (prep.qkv != nullptr; a.q unused): the kernel does qkv_prepare's work
  // for its rows from the raw qkv rows (qkv_head.cuh, identical rounding): each block normalises and
  // rotates its rows' q heads into shared memory, and the one block per (seq, kv head) whose key range
  // holds a new key (>= seq_len - q_len) writes that token's k and v into the cache.
  QkvArgs prep;
  // Prefill launches of the warp-specialised kernel: grid y runs over (prefill_seqs[i], kv head) pairs
  // (AttentionParams::prefill_seqs) instead of every sequence; nullptr: y / num_kv_heads is the sequence.
  const int* prefill_seqs;
  // Decode shape, not fused: K / V rows come in by cp.async.bulk, one row a thread (bulk_kv_rows).
  bool bulk_kv;
};

// The kernel arguments every tensor-core launch shares (splits, workspace and counters are the caller's).
inline MmaArgs make_mma_args(const AttentionParams& p) {
  MmaArgs a{};
  a.q = p.q.data;
  a.k_cache = p.k_cache.data;
  a.v_cache = p.v_cache.data;
  a.out = p.out.data;
  a.query_start = p.query_start.ptr<int>();
  a.seq_lens = p.seq_lens.ptr<int>();
  a.block_tables = p.block_tables.ptr<int>();
  a.num_seqs = p.num_seqs;
  a.max_blocks_per_seq = p.max_blocks_per_seq;
  a.block_size = p.block_size;
  a.block_shift = -1;
  for (int sh = 0; sh < 31; ++sh)
    if (p.block_size == (1 << sh)) a.block_shift = sh;
  a.num_heads = p.num_heads;
  a.num_kv_heads = p.num_kv_heads;
  a.group = p.num_heads / p.num_kv_heads;
  a.scale_log2 = p.scale * 1.4426950408889634f;
  return a;
}

// The tensor-core kernels' dtypes and head dims (others take attention_simple.cu).
inline bool mma_supported(const AttentionParams& p) {
  return (p.q.dtype == DType::kBF16 || p.q.dtype == DType::kF16) && (p.head_dim == 64 || p.head_dim == 128);
}

// Key splits of a sequence: the planned length, stretched when the host hint undercounted so that the
// sequence needs at most `num_splits` splits, the grid z its shape was launched with. (Stretching to
// max_splits instead would let a shape with fewer launched splits leave partials the merge reads
// unwritten.)
__device__ __forceinline__ int split_len_for(int kv_len, int planned, int num_splits) {
  const int need = (kv_len + num_splits - 1) / num_splits;
  const int need64 = (need + kBN - 1) / kBN * kBN;
  return max(planned, need64);
}

// Key splits of a decode-shape sequence: the real context spread evenly over all `num_splits` launched
// splits (the grid z of the decode shape), each a whole number of 64-key tiles and at least `min_len`
// keys. A hint that undercounts (graph capture) gives longer splits, one that overcounts shorter ones,
// so a short context still spreads over the blocks the grid launches anyway. Never more than
// num_splits splits: nsplit = ceil(kv_len / len) <= num_splits.
__device__ __forceinline__ int decode_split_len(int kv_len, int min_len, int num_splits) {
  const int need = (kv_len + num_splits - 1) / num_splits;
  const int need64 = (need + kBN - 1) / kBN * kBN;
  return max(min_len, need64);
}

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int sz = valid ? 16 : 0;  // 0: zero-fill, nothing read
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(sz));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* p) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(s));
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], const void* p) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(s));
}

// 2^x on the SFU; 2^-inf = +0.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

template <typename T>
__device__ __forceinline__ void mma16816(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

template <typename T>
__device__ __forceinline__ unsigned pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<unsigned*>(&v);
  } else {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<unsigned*>(&v);
  }
}


// One tile step of the tensor-core kernels, for one 16-row m-tile whose Q fragments qf sit in registers
// (fragment layouts of mma.sync m16n8k16: a lane holds rows g = lane / 4 and g + 8, columns 2 * (lane % 4)
// (+1)). Shared by attention_mma.cu and attention_invariant.cu (the wide prefill kernel shares the softmax
// step; it interleaves two m-tiles per K/V fragment load).

// s[nt] = Q K^T over keys kw0 + [0, 8 * kNT) of the tile kt (rows of D + kPad elements).
template <typename T, int D, int kNT>
__device__ __forceinline__ void qk_scores(float (&s)[kNT][4], const unsigned (&qf)[D / 16][4], const T* kt, int kw0,
                                          int lane) {
  constexpr int kLd = D + kPad;
#pragma unroll
  for (int i = 0; i < kNT; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
    for (int nt = 0; nt < kNT; nt += 2) {
      unsigned b[4];
      const int key = kw0 + nt * 8 + (lane % 8) + (lane / 16) * 8;
      const int col = kk * 16 + ((lane / 8) % 2) * 8;
      ldmatrix_x4(b, kt + key * kLd + col);
      mma16816<T>(s[nt], qf[kk], b[0], b[1]);
      mma16816<T>(s[nt + 1], qf[kk], b[2], b[3]);
    }
  }
}

// Online softmax (log2 domain, the scale folded into the exponent) after a tile: mx = this lane's row
// maxima of the masked scores (-inf where masked). Updates the running max m and sum l of both rows,
// turns s into the probabilities and returns in corr the factors the accumulated output must be scaled
// by (the wgmma kernel applies them later, once its in-flight P V has finished with O).
template <int kNT>
__device__ __forceinline__ void softmax_probs(float (&s)[kNT][4], float (&m)[2], float (&l)[2], float (&mx)[2],
                                              float (&corr)[2], float scale_log2) {
#pragma unroll
  for (int ri = 0; ri < 2; ++ri) {
    mx[ri] = mx[ri] == -INFINITY ? -INFINITY : mx[ri] * scale_log2;
    mx[ri] = fmaxf(mx[ri], __shfl_xor_sync(0xffffffffu, mx[ri], 1));
    mx[ri] = fmaxf(mx[ri], __shfl_xor_sync(0xffffffffu, mx[ri], 2));
    const float m_new = fmaxf(m[ri], mx[ri]);
    const float m_use = m_new == -INFINITY ? 0.f : m_new;  // all masked so far: p = 0, no NaN
    corr[ri] = exp2f(m[ri] - m_use);
    m[ri] = m_new;
    mx[ri] = m_use;
    l[ri] *= corr[ri];
  }
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float p = fast_exp2(fmaf(s[nt][e], scale_log2, -mx[e / 2]));
      s[nt][e] = p;
      l[e / 2] += p;
    }
}

// The causal / range mask of one 16-row m-tile's scores s (keys kbase + [0, 8 * kNT), this lane's
// columns) and this lane's row maxima mx of what is left. full: the tile lies wholly inside every row's
// range (no key >= kend, none past a row's position pos[ri]): nothing to mask. The two cases are separate
// loops behind one branch: with a per-element `if (!full)` the compiler predicated the mask's compares
// and selects into every tile (ncu, session 51: ~300 of a prefill consumer warp's ~1,000 instructions a
// tile, on tiles that needed no mask). A kept key is one with key < kend and key <= pos, i.e. column
// 8 nt + (e & 1) <= min(pos, kend - 1) - kbase - 2 tq: one compare against a constant an element.
template <int kNT>
__device__ __forceinline__ void mask_scores_max(float (&s)[kNT][4], float (&mx)[2], bool full, int kbase, int kend,
                                                const int (&pos)[2], int tq) {
  mx[0] = mx[1] = -INFINITY;
  if (full) {
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) mx[e / 2] = fmaxf(mx[e / 2], s[nt][e]);
    return;
  }
  int lim[2];
#pragma unroll
  for (int ri = 0; ri < 2; ++ri) lim[ri] = min(pos[ri], kend - 1) - kbase - 2 * tq;
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int ri = e / 2;
      const float v = nt * 8 + (e & 1) <= lim[ri] ? s[nt][e] : -INFINITY;
      s[nt][e] = v;
      mx[ri] = fmaxf(mx[ri], v);
    }
}

// O's rows g and g + 8 scaled by corr[0] and corr[1] (the online softmax's rescale).
template <int kDT>
__device__ __forceinline__ void rescale_rows(float (&o)[kDT][4], const float (&corr)[2]) {
#pragma unroll
  for (int dt = 0; dt < kDT; ++dt) {
    o[dt][0] *= corr[0];
    o[dt][1] *= corr[0];
    o[dt][2] *= corr[1];
    o[dt][3] *= corr[1];
  }
}

// softmax_probs, then o rescaled at once (the mma.sync kernels).
template <int kNT, int kDT>
__device__ __forceinline__ void online_softmax_step(float (&s)[kNT][4], float (&o)[kDT][4], float (&m)[2], float (&l)[2],
                                                    float (&mx)[2], float scale_log2) {
  float corr[2];
  softmax_probs<kNT>(s, m, l, mx, corr, scale_log2);
  rescale_rows<kDT>(o, corr);
}

// The A fragment of keys [16 kc, 16 kc + 16) of P (16 rows): the probabilities' accumulator layout is
// the A-fragment layout, rounded to T.
template <typename T, int kNT>
__device__ __forceinline__ void pack_p_fragment(unsigned (&pa)[4], const float (&p)[kNT][4], int kc) {
  pa[0] = pack2<T>(p[2 * kc][0], p[2 * kc][1]);
  pa[1] = pack2<T>(p[2 * kc][2], p[2 * kc][3]);
  pa[2] = pack2<T>(p[2 * kc + 1][0], p[2 * kc + 1][1]);
  pa[3] = pack2<T>(p[2 * kc + 1][2], p[2 * kc + 1][3]);
}

// o += P V over keys kw0 + [0, 8 * kNT) of the tile vt: P's accumulator layout is the A-fragment layout.
template <typename T, int D, int kNT>
__device__ __forceinline__ void pv_accumulate(float (&o)[D / 8][4], const float (&p)[kNT][4], const T* vt, int kw0,
                                              int lane) {
  constexpr int kLd = D + kPad;
#pragma unroll
  for (int kc = 0; kc < kNT / 2; ++kc) {
    unsigned pa[4];
    pack_p_fragment<T, kNT>(pa, p, kc);
#pragma unroll
    for (int dt = 0; dt < D / 8; dt += 2) {
      unsigned b[4];
      const int key = kw0 + kc * 16 + (lane % 8) + ((lane / 8) % 2) * 8;
      const int col = dt * 8 + (lane / 16) * 8;
      ldmatrix_x4_trans(b, vt + key * kLd + col);
      mma16816<T>(o[dt], pa, b[0], b[1]);
      mma16816<T>(o[dt + 1], pa, b[2], b[3]);
    }
  }
}

// The decode shape's warp merge: each of the 4 warps holds a partial softmax (o unnormalised, running
// max m in log2 units, sum l) of its key quarter for the 16 rows (a lane: rows g and g + 8). In shared
// memory no longer used by the tiles: sm_o [4][16][D], sm_m [4][16], sm_l [4][16].
template <int D>
__device__ __forceinline__ void store_warp_partial(float* sm_o, float* sm_m, float* sm_l, const float (&o)[D / 8][4],
                                                   const float (&m)[2], const float (&l)[2], int warp, int g, int tq) {
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) {
    const int col = dt * 8 + 2 * tq;
    sm_o[(warp * 16 + g) * D + col] = o[dt][0];
    sm_o[(warp * 16 + g) * D + col + 1] = o[dt][1];
    sm_o[(warp * 16 + g + 8) * D + col] = o[dt][2];
    sm_o[(warp * 16 + g + 8) * D + col + 1] = o[dt][3];
  }
  if (tq == 0) {
    sm_m[warp * 16 + g] = m[0];
    sm_m[warp * 16 + g + 8] = m[1];
    sm_l[warp * 16 + g] = l[0];
    sm_l[warp * 16 + g + 8] = l[1];
  }
}

// Row r, column col of the 4 warps' partials merged: mm the row's max, ll its sum, returns the output
// (unnormalised, relative to mm).
template <int D>
__device__ __forceinline__ float merge_warp_partials(const float* sm_o, const float* sm_m, const float* sm_l, int r,
                                                     int col, float& mm, float& ll) {
  mm = -INFINITY;
#pragma unroll
  for (int w = 0; w < 4; ++w) mm = fmaxf(mm, sm_m[w * 16 + r]);
  const float mu = mm == -INFINITY ? 0.f : mm;
  float oo = 0.f;
  ll = 0.f;
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    const float f = exp2f(sm_m[w * 16 + r] - mu);
    ll += sm_l[w * 16 + r] * f;
    oo += sm_o[(w * 16 + r) * D + col] * f;
  }
  return oo;
}

// The prefill shapes' epilogue for one of a lane's two rows (ri: row g or g + 8 of its m-tile), query
// head th (token * H + head), row sum ll (reduced over the quad), running max m: O / ll into out when the
// sequence is not split (direct), else the unnormalised partial and (m, ll) into split `split`'s slot.
template <typename T, int D>
__device__ __forceinline__ void store_rows_out(const MmaArgs& a, const float (&o)[D / 8][4], int ri, int64_t th,
                                               float m, float ll, int split, bool direct, int tq) {
  const float inv = ll > 0.f ? 1.f / ll : 0.f;
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) {
    const int col = dt * 8 + 2 * tq;
    const float o0 = o[dt][2 * ri], o1 = o[dt][2 * ri + 1];
    if (direct) {
      *reinterpret_cast<unsigned*>(static_cast<T*>(a.out) + th * D + col) = pack2<T>(o0 * inv, o1 * inv);
    } else {
      *reinterpret_cast<float2*>(a.ws_o + (th * a.max_splits + split) * D + col) = make_float2(o0, o1);
    }
  }
  if (!direct && tq == 0) a.ws_ml[th * a.max_splits + split] = make_float2(m, ll);
}

// Which rows of a tile load_kv_tile gathers: all; all but this step's new keys [new0, kend) (issued
// before the PDL wait: the previous kernel may still be writing those); only the new keys.
enum class TileRows : int { kAll, kOld, kNew };

// Gathers keys [kt0, kt0 + kBN) of KV head hk from the paged cache into stage `stage` of the K and V
// shared-memory tiles (rows of D + kPad elements), 16 bytes per cp.async; keys >= kend are zero-filled.
// `rows` selects a subset (new0: the first new key). All kThreads threads of the block take part.
// table: this sequence's block-table row.
// The cache slot of key `key` of the sequence whose block-table row is `table`. kShift: the block size is a
// power of two (a.block_shift): page and offset by shift and mask, not by an integer division (~20
// instructions, once per unrolled row of a tile gather: code on the batch-1 path).
template <bool kShift = false>
__device__ __forceinline__ int paged_slot(const MmaArgs& a, const int* table, int key) {
  return kShift ? (table[key >> a.block_shift] << a.block_shift) + (key & (a.block_size - 1))
                : table[key / a.block_size] * a.block_size + key % a.block_size;
}

// kShift: as paged_slot's.
template <typename T, int D, bool kShift = false>
__device__ __forceinline__ void load_kv_tile(const MmaArgs& a, const int* table, int hk, int kt0, int kend, T* ks,
                                             T* vs, int stage, TileRows rows = TileRows::kAll, int new0 = 0) {
  constexpr int kLd = D + kPad;
  constexpr int kChunksPerRow = D / 8;
  const int64_t head_stride = static_cast<int64_t>(a.num_kv_heads) * D;
#pragma unroll
  for (int i = 0; i < kBN * kChunksPerRow / kThreads; ++i) {
    const int c = threadIdx.x + i * kThreads;
    const int r = c / kChunksPerRow, col = (c % kChunksPerRow) * 8;
    const int key = kt0 + r;
    const bool valid = key < kend;
    const bool is_new = valid && key >= new0;
    if ((rows == TileRows::kOld && is_new) || (rows == TileRows::kNew && !is_new)) continue;
    int64_t off = 0;
    if (valid) {
      const int slot = paged_slot<kShift>(a, table, key);
      off = static_cast<int64_t>(slot) * head_stride + static_cast<int64_t>(hk) * D + col;
    }
    cp_async16(ks + (stage * kBN + r) * kLd + col, static_cast<const T*>(a.k_cache) + off, valid);
    cp_async16(vs + (stage * kBN + r) * kLd + col, static_cast<const T*>(a.v_cache) + off, valid);
  }
}

// An FP8 cache (--kv-cache-dtype fp8): load_kv_tile's gather of E4M3 codes into byte rows of D + 16
// (16 codes a cp.async), then convert_kv_tile widens a landed stage into the f16 tiles the mma reads.
template <int D>
__device__ __forceinline__ void load_kv_tile_fp8(const MmaArgs& a, const int* table, int hk, int kt0, int kend,
                                                 uint8_t* ks8, uint8_t* vs8, int stage, TileRows rows, int new0) {
  constexpr int kLd8 = D + 16;
  constexpr int kChunksPerRow = D / 16;
  const int64_t head_stride = static_cast<int64_t>(a.num_kv_heads) * D;
#pragma unroll
  for (int i = 0; i < kBN * kChunksPerRow / kThreads; ++i) {
    const int c = threadIdx.x + i * kThreads;
    const int r = c / kChunksPerRow, col = (c % kChunksPerRow) * 16;
    const int key = kt0 + r;
    const bool valid = key < kend;
    const bool is_new = valid && key >= new0;
    if ((rows == TileRows::kOld && is_new) || (rows == TileRows::kNew && !is_new)) continue;
    int64_t off = 0;
    if (valid) off = static_cast<int64_t>(paged_slot(a, table, key)) * head_stride + static_cast<int64_t>(hk) * D + col;
    cp_async16(ks8 + (stage * kBN + r) * kLd8 + col, static_cast<const uint8_t*>(a.k_cache) + off, valid);
    cp_async16(vs8 + (stage * kBN + r) * kLd8 + col, static_cast<const uint8_t*>(a.v_cache) + off, valid);
  }
}

// Rows [row0, row0 + kRows) of one landed stage of codes (src: [kBN][D + 16] bytes) as f16 in dst
// ([kBN][D + kPad]): exact (every E4M3 value is an f16). Threads tid of kN take part (the block for a
// whole tile, a warp for its own rows); the caller syncs them before and after.
template <int D, int kRows, int kN>
__device__ __forceinline__ void widen_code_rows(const uint8_t* src, __half* dst, int row0, int tid) {
  constexpr int kLd8 = D + 16, kLd = D + kPad;
  constexpr int kChunksPerRow = D / 16;
  static_assert(kRows * kChunksPerRow % kN == 0, "whole chunks a thread");
#pragma unroll
  for (int i = 0; i < kRows * kChunksPerRow / kN; ++i) {
    const int c = tid + i * kN;
    const int r = row0 + c / kChunksPerRow, col = (c % kChunksPerRow) * 16;
    uint4 lo, hi;
    fp8x16_to_half16(*reinterpret_cast<const uint4*>(src + r * kLd8 + col), lo, hi);
    reinterpret_cast<uint4*>(dst + r * kLd + col)[0] = lo;
    reinterpret_cast<uint4*>(dst + r * kLd + col)[1] = hi;
  }
}

// K / V stages of the tensor-core kernels: kStages; an FP8 cache's decode shape kFp8DecodeStages. Its
// stages are half the bytes, and the kernel is bound by the bytes in flight (3 stages of codes: 40% of
// HBM with the widening, 56% without it, against 88% for 3 of bf16 on the H200, session 39).
constexpr int kFp8DecodeStages = 5;
template <typename T, typename C, bool kDecode>
constexpr int mma_stages() {
  return !std::is_same_v<C, T> && kDecode ? kFp8DecodeStages : kStages;
}

// The shared memory of a tensor-core kernel's K / V tiles: stages of T rows; an FP8 cache (C = KvFp8):
// stages of code rows, then the f16 rows they are widened into: one tile pair (prefill shape, where the
// block shares each tile), or one tile (decode: each warp widens its own 16 keys' K, then their V).
template <typename T, int D, typename C, bool kDecode>
constexpr size_t mma_tile_smem_bytes() {
  constexpr size_t stages = mma_stages<T, C, kDecode>();
  if constexpr (std::is_same_v<C, T>) return stages * 2 * kBN * (D + kPad) * sizeof(T);
  else return stages * 2 * kBN * (D + 16) + size_t{kDecode ? 1 : 2} * kBN * (D + kPad) * sizeof(__half);
}

// A Q fragment register (2 values of T) as the mma's type M: as is, or bf16 -> f16 for an FP8 cache's
// f16 mma (clamped to f16's range: no infinity from a large q).
template <typename T, typename M>
__device__ __forceinline__ unsigned q_pair_as(unsigned u) {
  if constexpr (std::is_same_v<T, M>) {
    return u;
  } else {
    const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u));
    const __half2 h = __floats2half2_rn(fminf(fmaxf(f.x, -65504.f), 65504.f), fminf(fmaxf(f.y, -65504.f), 65504.f));
    return *reinterpret_cast<const unsigned*>(&h);
  }
}

// Decode with MmaArgs::bulk_kv: the same tile as load_kv_tile, but each of the block's 128 threads moves
// one whole row (one key's K or V of KV head hk: D elements, 128 or 256 bytes) with one cp.async.bulk,
// counted on the stage's mbarrier (kThreads arrivals a phase: every thread arrives once per tile, with
// its row's bytes as expected transfer); rows past kend are zero-stored and arrive without bytes. Bulk
// copies are not held to the per-SM cap on outstanding 16-byte requests, and move a row in one request.
__device__ __forceinline__ void kv_bar_init(uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(bar))),
               "r"(count)
               : "memory");
}
__device__ __forceinline__ void kv_bar_wait(uint64_t* bar, unsigned parity) {
  asm volatile(
      "{\n .reg .pred done;\n WAIT:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      " @!done bra WAIT;\n}" ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(bar))),
      "r"(parity)
      : "memory");
}

template <typename T, int D>
__device__ __forceinline__ void bulk_kv_rows(const MmaArgs& a, const int* table, int hk, int kt0, int kend, T* ks,
                                             T* vs, int stage, uint64_t* bar, TileRows rows, int new0) {
  static_assert(2 * kBN == kThreads, "one row a thread");
  constexpr int kLd = D + kPad;
  constexpr unsigned kRowBytes = D * sizeof(T);
  const int r = threadIdx.x % kBN;
  const bool is_v = threadIdx.x >= kBN;
  const int key = kt0 + r;
  const bool valid = key < kend, is_new = valid && key >= new0;
  if ((rows == TileRows::kOld && is_new) || (rows == TileRows::kNew && !is_new)) return;
  T* dst = (is_v ? vs : ks) + (stage * kBN + r) * kLd;
  const unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(bar));
  if (!valid) {  // as cp.async's zero-fill: finite values under the mask
#pragma unroll
    for (int c = 0; c < D / 8; ++c) reinterpret_cast<uint4*>(dst)[c] = make_uint4(0, 0, 0, 0);
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(b) : "memory");
    return;
  }
  const int slot = paged_slot(a, table, key);
  const T* src = static_cast<const T*>(is_v ? a.v_cache : a.k_cache) +
                 (static_cast<int64_t>(slot) * a.num_kv_heads + hk) * D;
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"(kRowBytes) : "memory");
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   static_cast<unsigned>(__cvta_generic_to_shared(dst))),
               "l"(src), "r"(kRowBytes), "r"(b)
               : "memory");
}

}  // namespace
}  // namespace vireo::cuda
