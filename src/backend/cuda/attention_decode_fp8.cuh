// The decode shape over an FP8 KV cache (--kv-cache-dtype fp8): rows (token, head-in-group) of one
// sequence and KV head, q_len * G <= 16, E4M3 codes taken from shared memory straight into mma.sync
// fragments (no f16 copy of the tile). Included by attention_mma.cu, which plans the splits and launches it.
//
// Form: S^T = K Q^T and O^T += V^T P^T (mma.sync m16n8k16, f16 in, f32 accumulate). 16 keys are the m
// dimension and the query rows the n dimension: 8 a tile (kNT = 1; 9-16 rows: kNT = 2), so a decode row
// group of G <= 8 fills the mma instead of padding 16 rows (half the mma steps of the row-major form).
// Fragments from codes: a dot product does not care in which order it visits d, so each lane takes one
// contiguous run of a row (D / 4 codes of K, D / 8 of V), and the permutation is applied to q (for K) and
// undone when the output is stored (for V). Four codes become two f16x2 by shifts and masks
// (e4m3x4_to_f16: the code's exponent and mantissa land in the low bits of the f16's, which is the value
// times 2^-8, exact, subnormals included); the 2^-8 is folded into the softmax scale (K) and the output
// (V). P^T's B fragment is the transposed S^T accumulator (movmatrix.trans).
// Pipeline: each warp streams its own chunks of 16 kKT keys (chunks warp, warp + 4, ... of the block's key
// split; default 16) through kSt (3) stages of [16 kKT keys][D + 16 bytes] by cp.async: no block barrier in the loop;
// the four warps' partial softmaxes merge at the end, then the splits in the kernel (attention_split_merge.cuh).
// Lean forms (kLean, the default; VIREO_FP8_DECODE=30 is form 31 without it), after an ncu profile (session
// 49, H100: 12 warps an SM, 0.43 issues a cycle per scheduler, stalls mostly on the block table loads each
// cp.async waited for): where a chunk lies in one page (power-of-two pages of >= 16 kKT keys; splits are
// multiples of 64 keys) a lane takes one table entry a chunk, fetched for 32 chunks at once and passed by
// shuffles, and the rows' addresses step by a constant; D 128 rows are stored unpadded (128 bytes, 16-byte
// chunks XOR-swizzled by row: conflict-free as the padding was), so four blocks fit an SM.
#pragma once
#include <climits>
#include <type_traits>

#include "backend/cuda/attention_mma_common.cuh"
#include "backend/cuda/attention_split_merge.cuh"

namespace vireo::cuda {
namespace {

// Bytes of one code row in shared memory: D + 16 (padding: conflict-free fragment reads), or D for the
// lean D 128 form, whose 16-byte chunks are swizzled instead (code_col).
template <int D, bool kLean>
constexpr int fp8_row_bytes() {
  return kLean && D == 128 ? D : D + 16;
}

// Byte column in shared memory of code byte `col` of row `row`: chunk (col / 16) XOR (row % 8) for swizzled
// rows. Readers and writers of a stage agree through this.
template <int D, bool kLean>
__device__ __forceinline__ int code_col(int row, int col) {
  if constexpr (fp8_row_bytes<D, kLean>() == D) return (((col >> 4) ^ (row & 7)) << 4) | (col & 15);
  else return col;
}

// A warp takes kKT m16 key tiles (16 kKT keys, a chunk) per step.
template <int D, int kSt, int kKT, bool kLean>
constexpr size_t decode_fp8_smem_bytes() {  // per warp: kSt stages of K and V code rows
  return size_t{kThreads / 32} * kSt * 2 * 16 * kKT * fp8_row_bytes<D, kLean>();
}

// Four E4M3 codes (bytes b0..b3 of w) as two f16x2 holding value * 2^-8: even = (b0, b2), odd = (b1, b3).
__device__ __forceinline__ void e4m3x4_to_f16(unsigned w, unsigned& even, unsigned& odd) {
  odd = (w & 0x80008000u) | ((w >> 1) & 0x3F803F80u);
  even = ((w << 8) & 0x80008000u) | ((w << 7) & 0x3F803F80u);
}

// The transpose of an 8 x 8 b16 matrix in mma fragment layout (lane: row lane / 4, columns 2 (lane % 4), +1).
__device__ __forceinline__ unsigned movmatrix_trans(unsigned x) {
  unsigned y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
  return y;
}

// Two q values as an f16x2 (bf16 clamped to f16's range: no infinity from a large q).
template <typename T>
__device__ __forceinline__ unsigned q_f16_pair(T lo, T hi) {
  const float a = fminf(fmaxf(static_cast<float>(lo), -65504.f), 65504.f);
  const float b = fminf(fmaxf(static_cast<float>(hi), -65504.f), 65504.f);
  const __half2 h = __floats2half2_rn(a, b);
  return *reinterpret_cast<const unsigned*>(&h);
}

// Keys [key0, key0 + kKeys) of KV head hk into one warp's stage (kdst / vdst: [kKeys][D + 16] bytes), 16
// codes a cp.async; keys >= kend zero-filled; `which` as load_kv_tile's (new0: this step's first new key).
template <int D, int kKeys, bool kLean>
__device__ __forceinline__ void load_chunk_fp8(const MmaArgs& a, const int* table, int hk, int key0, int kend,
                                               uint8_t* kdst, uint8_t* vdst, TileRows which, int new0, int lane) {
  constexpr int kLd8 = fp8_row_bytes<D, kLean>(), kPerRow = D / 16;
  const int64_t head_stride = static_cast<int64_t>(a.num_kv_heads) * D;
#pragma unroll
  for (int i = 0; i < kKeys * kPerRow / 32; ++i) {
    const int c = lane + 32 * i;
    const int r = c / kPerRow, col = (c % kPerRow) * 16;
    const int key = key0 + r;
    const bool valid = key < kend;
    const bool is_new = valid && key >= new0;
    if ((which == TileRows::kOld && is_new) || (which == TileRows::kNew && !is_new)) continue;
    int64_t off = 0;
    if (valid) {
      const int slot = a.block_shift >= 0 ? paged_slot<true>(a, table, key) : paged_slot<false>(a, table, key);
      off = static_cast<int64_t>(slot) * head_stride + static_cast<int64_t>(hk) * D + col;
    }
    const int sc = r * kLd8 + code_col<D, kLean>(r, col);
    cp_async16(kdst + sc, static_cast<const uint8_t*>(a.k_cache) + off, valid);
    cp_async16(vdst + sc, static_cast<const uint8_t*>(a.v_cache) + off, valid);
  }
}

// load_chunk_fp8 for a chunk inside one page whose first key's slot is `slot0` (the lean gather): row r of
// the chunk is slot0 + r, so the lane's addresses step by a constant. lane_off: the lane's first row's byte
// offset in a cache from slot 0 (its row lane / (D / 16), its column and the KV head's).
template <int D, int kKeys, bool kLean>
__device__ __forceinline__ void load_page_chunk_fp8(const MmaArgs& a, int64_t slot0, int64_t lane_off, int key0,
                                                    int kend, uint8_t* kdst, uint8_t* vdst, TileRows which,
                                                    int new0, int lane) {
  constexpr int kLd8 = fp8_row_bytes<D, kLean>(), kPerRow = D / 16, kRowStep = 32 / kPerRow;
  const int64_t head_stride = static_cast<int64_t>(a.num_kv_heads) * D;
  const int64_t base = slot0 * head_stride + lane_off;
  const int r0 = lane / kPerRow, col = (lane % kPerRow) * 16;
#pragma unroll
  for (int i = 0; i < kKeys / kRowStep; ++i) {
    const int r = r0 + kRowStep * i;
    const int key = key0 + r;
    const bool valid = key < kend;
    const bool is_new = valid && key >= new0;
    if ((which == TileRows::kOld && is_new) || (which == TileRows::kNew && !is_new)) continue;
    const int64_t off = valid ? base + kRowStep * i * head_stride : 0;
    const int sc = r * kLd8 + code_col<D, kLean>(r, col);
    cp_async16(kdst + sc, static_cast<const uint8_t*>(a.k_cache) + off, valid);
    cp_async16(vdst + sc, static_cast<const uint8_t*>(a.v_cache) + off, valid);
  }
}

// One block's work: keys [kstart, kend) of sequence s, KV head hk, for its `rows` <= 8 * kNT query rows.
// Calls pdl_enter() (after the loads of keys older than this step's).
template <typename T, int D, int kNT, int kSt, int kKT, bool kLean, bool kPaged>
__device__ __forceinline__ void decode_fp8_rows(const MmaArgs& a, unsigned char* smem, int s, int hk, int q0,
                                                int q_len, int kv_len, int rows, int kstart, int kend, int nsplit) {
  constexpr int kLd8 = fp8_row_bytes<D, kLean>();
  constexpr int kKK = D / 16;    // k-steps of S^T = m-tiles of O^T
  constexpr int kKRun = D / 4;   // codes of a K row a lane takes
  constexpr int kVRun = D / 8;   // codes of a V row a lane takes
  constexpr int kChunk = 16 * kKT;  // keys a warp takes per step
  constexpr int kStageBytes = 2 * kChunk * kLd8;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  uint8_t* wbuf = smem + warp * kSt * kStageBytes;
  const int* table = a.block_tables + static_cast<int64_t>(s) * a.max_blocks_per_seq;
  const int new0 = kv_len - q_len;  // keys >= new0 are this step's (and the smallest row position)
  const int nchunks = (kend - kstart + kChunk - 1) / kChunk;
  const int nmine = nchunks > warp ? (nchunks - warp + 3) / 4 : 0;  // chunks warp, warp + 4, ...
  auto chunk_key0 = [&](int i) { return kstart + (warp + 4 * i) * kChunk; };
  // kPaged: lane j holds the page of chunk (batch0 + j); chunks are asked for in increasing order.
  int page_batch = 0, batch0 = -1;
  const int64_t lane_off = static_cast<int64_t>(lane / (D / 16)) * a.num_kv_heads * D + static_cast<int64_t>(hk) * D +
                           (lane % (D / 16)) * 16;
  auto load = [&](int i, TileRows which) {
    uint8_t* st = wbuf + (i % kSt) * kStageBytes;
    if constexpr (kPaged) {
      if ((i & ~31) != batch0) {
        batch0 = i & ~31;
        const int c = batch0 + lane;
        page_batch = c < nmine ? table[chunk_key0(c) >> a.block_shift] : 0;
      }
      const int page = __shfl_sync(0xffffffffu, page_batch, i & 31);
      const int key0 = chunk_key0(i);
      const int64_t slot0 = (static_cast<int64_t>(page) << a.block_shift) + (key0 & (a.block_size - 1));
      load_page_chunk_fp8<D, kChunk, kLean>(a, slot0, lane_off, key0, kend, st, st + kChunk * kLd8, which, new0, lane);
    } else {
      load_chunk_fp8<D, kChunk, kLean>(a, table, hk, chunk_key0(i), kend, st, st + kChunk * kLd8, which, new0, lane);
    }
  };
  // The first chunks' older keys stream in while the previous kernel finishes.
#pragma unroll
  for (int i = 0; i < kSt - 1; ++i)
    if (i < nmine) load(i, TileRows::kOld);
  pdl_enter();
#pragma unroll
  for (int i = 0; i < kSt - 1; ++i)
    if (i < nmine) load(i, TileRows::kNew);
#pragma unroll
  for (int i = 0; i < kSt - 1; ++i) cp_async_commit();  // the first group holds them all

  // q as B fragments (k = the permuted d, n = row 8 nt + g); this lane's score columns are rows
  // 8 nt + 2t (+1), at positions pos.
  unsigned qb[kNT][kKK][2];
  int pos[kNT][2];
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt) {
    const int r = 8 * nt + g;
    const int64_t th = static_cast<int64_t>(q0 + r / a.group) * a.num_heads + hk * a.group + r % a.group;
    const T* qrow = r < rows ? static_cast<const T*>(a.q) + th * D + kKRun * t : nullptr;
#pragma unroll
    for (int j = 0; j < kKK; ++j) {
      if (qrow == nullptr) {
        qb[nt][j][0] = qb[nt][j][1] = 0u;
        continue;
      }
      const uint2 raw = *reinterpret_cast<const uint2*>(qrow + 4 * j);  // 4 values of T
      const T* e = reinterpret_cast<const T*>(&raw);
      qb[nt][j][0] = q_f16_pair<T>(e[0], e[2]);
      qb[nt][j][1] = q_f16_pair<T>(e[1], e[3]);
    }
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const int rc = 8 * nt + 2 * t + c;
      pos[nt][c] = rc < rows ? new0 + rc / a.group : kv_len - 1;
    }
  }

  float o[kNT][kKK][4];  // O^T: m-tile mt holds d = kVRun g + 2 mt (+1 for rows g + 8)
  float m[kNT][2], l[kNT][2];
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
    for (int mt = 0; mt < kKK; ++mt) o[nt][mt][0] = o[nt][mt][1] = o[nt][mt][2] = o[nt][mt][3] = 0.f;
    m[nt][0] = m[nt][1] = -INFINITY;
    l[nt][0] = l[nt][1] = 0.f;
  }
  const float sl2 = a.scale_log2 * 256.f;  // K's codes read as value * 2^-8

  for (int i = 0; i < nmine; ++i) {
    cp_async_wait<kSt - 2>();
    __syncwarp();  // every lane's copies of chunk i landed; every lane is done with chunk i - 1's stage
    if (i + kSt - 1 < nmine) load(i + kSt - 1, TileRows::kAll);
    cp_async_commit();
    const uint8_t* kst = wbuf + (i % kSt) * kStageBytes;
    const uint8_t* vst = kst + kChunk * kLd8;
    const int key0 = chunk_key0(i);

    // S^T of the chunk's 16-key tiles: c0 / c1 key g, rows 8 nt + 2t / +1; c2 / c3 key g + 8.
    float sc[kKT][kNT][4];
#pragma unroll
    for (int kt = 0; kt < kKT; ++kt) {
      uint4 ka[kKRun / 16], kb[kKRun / 16];
#pragma unroll
      for (int u = 0; u < kKRun / 16; ++u) {
        const int ra = 16 * kt + g, rb = ra + 8;
        ka[u] = *reinterpret_cast<const uint4*>(kst + ra * kLd8 + code_col<D, kLean>(ra, kKRun * t + 16 * u));
        kb[u] = *reinterpret_cast<const uint4*>(kst + rb * kLd8 + code_col<D, kLean>(rb, kKRun * t + 16 * u));
      }
      const unsigned* wa = reinterpret_cast<const unsigned*>(ka);
      const unsigned* wb = reinterpret_cast<const unsigned*>(kb);
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) sc[kt][nt][0] = sc[kt][nt][1] = sc[kt][nt][2] = sc[kt][nt][3] = 0.f;
#pragma unroll
      for (int j = 0; j < kKK; ++j) {
        unsigned af[4];
        e4m3x4_to_f16(wa[j], af[0], af[2]);
        e4m3x4_to_f16(wb[j], af[1], af[3]);
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) mma16816<__half>(sc[kt][nt], af, qb[nt][j][0], qb[nt][j][1]);
      }
    }

    // Mask, then the online softmax per query row (reduced over the 8 lanes g that share a column).
    const bool full = key0 + kChunk <= kend && key0 + kChunk - 1 <= new0;
    float mx[kNT][2];
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
      mx[nt][0] = mx[nt][1] = -INFINITY;
#pragma unroll
      for (int kt = 0; kt < kKT; ++kt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float v = sc[kt][nt][e];
          if (!full) {
            const int key = key0 + 16 * kt + g + 8 * (e / 2);
            v = (key < kend && key <= pos[nt][e & 1]) ? v : -INFINITY;
            sc[kt][nt][e] = v;
          }
          mx[nt][e & 1] = fmaxf(mx[nt][e & 1], v);
        }
    }
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        float x = mx[nt][c] == -INFINITY ? -INFINITY : mx[nt][c] * sl2;
        x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 4));
        x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 8));
        x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 16));
        const float m_new = fmaxf(m[nt][c], x);
        const float m_use = m_new == -INFINITY ? 0.f : m_new;  // all masked so far: p = 0, no NaN
        const float corr = exp2f(m[nt][c] - m_use);
        m[nt][c] = m_new;
        l[nt][c] *= corr;
#pragma unroll
        for (int mt = 0; mt < kKK; ++mt) {
          o[nt][mt][c] *= corr;
          o[nt][mt][c + 2] *= corr;
        }
#pragma unroll
        for (int kt = 0; kt < kKT; ++kt)
#pragma unroll
          for (int e = c; e < 4; e += 2) {
            const float p = fast_exp2(fmaf(sc[kt][nt][e], sl2, -m_use));
            sc[kt][nt][e] = p;
            l[nt][c] += p;
          }
      }

    // O^T += V^T P^T per 16-key tile: A = V^T (rows d, k keys 2t, 2t + 1 | 2t + 8, 2t + 9), B = P^T.
#pragma unroll
    for (int kt = 0; kt < kKT; ++kt) {
      unsigned pb[kNT][2];
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        pb[nt][0] = movmatrix_trans(pack2<__half>(sc[kt][nt][0], sc[kt][nt][1]));
        pb[nt][1] = movmatrix_trans(pack2<__half>(sc[kt][nt][2], sc[kt][nt][3]));
      }
      unsigned x[4][kVRun / 4];  // rows 2t, 2t + 1, 2t + 8, 2t + 9: codes [kVRun g, kVRun g + kVRun)
#pragma unroll
      for (int rr = 0; rr < 4; ++rr) {
        const int rv = 16 * kt + 2 * t + (rr & 1) + 8 * (rr / 2);
        const uint8_t* src = vst + rv * kLd8 + code_col<D, kLean>(rv, kVRun * g);
        if constexpr (kVRun == 16) {
          const uint4 v = *reinterpret_cast<const uint4*>(src);
          x[rr][0] = v.x;
          x[rr][1] = v.y;
          x[rr][2] = v.z;
          x[rr][3] = v.w;
        } else {
          const uint2 v = *reinterpret_cast<const uint2*>(src);
          x[rr][0] = v.x;
          x[rr][1] = v.y;
        }
      }
#pragma unroll
      for (int j = 0; j < kVRun / 4; ++j) {
        unsigned af[4];
        // codes 4j, 4j + 1 of the run: m-tile 2j; codes 4j + 2, 4j + 3: m-tile 2j + 1
        e4m3x4_to_f16(__byte_perm(x[0][j], x[1][j], 0x5410), af[0], af[1]);
        e4m3x4_to_f16(__byte_perm(x[2][j], x[3][j], 0x5410), af[2], af[3]);
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) mma16816<__half>(o[nt][2 * j], af, pb[nt][0], pb[nt][1]);
        e4m3x4_to_f16(__byte_perm(x[0][j], x[1][j], 0x7632), af[0], af[1]);
        e4m3x4_to_f16(__byte_perm(x[2][j], x[3][j], 0x7632), af[2], af[3]);
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) mma16816<__half>(o[nt][2 * j + 1], af, pb[nt][0], pb[nt][1]);
      }
    }
  }
  cp_async_wait<0>();
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      l[nt][c] += __shfl_xor_sync(0xffffffffu, l[nt][c], 4);
      l[nt][c] += __shfl_xor_sync(0xffffffffu, l[nt][c], 8);
      l[nt][c] += __shfl_xor_sync(0xffffffffu, l[nt][c], 16);
    }

  // The 4 warps' partials through shared memory (the stages are free once every warp is past its loop):
  // sm_o [4][16][D] (row-major d again), sm_m / sm_l [4][16]; then rows x D outputs merged.
  __syncthreads();
  float* sm_o = reinterpret_cast<float*>(smem);
  float* sm_m = sm_o + 4 * 16 * D;
  float* sm_l = sm_m + 4 * 16;
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const int r = 8 * nt + 2 * t + c;
#pragma unroll
      for (int mt = 0; mt < kKK; ++mt) {
        sm_o[(warp * 16 + r) * D + kVRun * g + 2 * mt] = o[nt][mt][c];
        sm_o[(warp * 16 + r) * D + kVRun * g + 2 * mt + 1] = o[nt][mt][c + 2];
      }
      if (g == 0) {
        sm_m[warp * 16 + r] = m[nt][c];
        sm_l[warp * 16 + r] = l[nt][c];
      }
    }
  __syncthreads();
  const int split = blockIdx.z;
  const bool direct = nsplit == 1;
  for (int idx = threadIdx.x; idx < rows * D; idx += kThreads) {
    const int r = idx / D, col = idx % D;
    float mm, ll;
    const float oo = 256.f * merge_warp_partials<D>(sm_o, sm_m, sm_l, r, col, mm, ll);  // V's 2^-8 undone
    const int64_t th = static_cast<int64_t>(q0 + r / a.group) * a.num_heads + hk * a.group + r % a.group;
    if (direct) {
      static_cast<T*>(a.out)[th * D + col] = from_f<T>(ll > 0.f ? oo / ll : 0.f);
    } else {
      a.ws_o[(th * a.max_splits + split) * D + col] = oo;
      if (col == 0) a.ws_ml[th * a.max_splits + split] = make_float2(mm, ll);
    }
  }
  if (direct || a.counters == nullptr) return;
  if (!last_split_to_arrive(a, nsplit)) return;
  merge_decode_splits<T, D>(a, reinterpret_cast<float*>(smem), q0, hk, rows, nsplit);
}

// Lean forms of <= 3 stages of 16 keys for row groups of <= 8 ask for 4 blocks an SM (<= 128 registers,
// which the 16-row path would spill): 16 warps to issue from.
template <int kSt, int kKT, bool kLean, int kNTOnly>
constexpr int decode_fp8_min_blocks() {
  return kLean && kNTOnly == 1 && kSt * kKT <= 3 ? 4 : 1;
}

// Grid (1, num_seqs * num_kv_heads, splits); blocks of sequences with more than 16 rows (prefill) exit.
// kNTOnly: 0 runs both row-group paths (<= 8 rows: kNT 1, 9-16: kNT 2); 1 or 2 runs only that one, and the
// other row groups' blocks exit (launch_decode_fp8 launches the two so that each block runs once).
template <typename T, int D, int kSt, int kKT, bool kLean, int kNTOnly>
__global__ void __launch_bounds__(kThreads, (decode_fp8_min_blocks<kSt, kKT, kLean, kNTOnly>()))
    attention_decode_fp8_kernel(MmaArgs a) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int s = blockIdx.y / a.num_kv_heads, hk = blockIdx.y % a.num_kv_heads;
  const int q0 = a.query_start[s], q_len = a.query_start[s + 1] - q0, kv_len = a.seq_lens[s];
  const int rows = q_len * a.group;
  const int split_len = decode_split_len(kv_len, a.split_len_decode, a.splits_decode);
  const int nsplit = (kv_len + split_len - 1) / split_len;
  const int kstart = blockIdx.z * split_len;
  const int kend = min(kv_len, kstart + split_len);
  const int nt = rows <= 8 ? 1 : 2;
  if (q_len <= 0 || rows > 16 || static_cast<int>(blockIdx.z) >= nsplit || kend <= kstart ||
      (kNTOnly != 0 && nt != kNTOnly)) {
    pdl_enter();
    return;
  }
  // The lean gather needs each chunk inside one page (the split's start is a multiple of 64 keys).
  const bool paged = kLean && a.block_shift >= 0 && a.block_size >= 16 * kKT && kstart % (16 * kKT) == 0;
  auto run = [&](auto nt_c, auto paged_c) {
    decode_fp8_rows<T, D, decltype(nt_c)::value, kSt, kKT, kLean, decltype(paged_c)::value>(
        a, smem_raw, s, hk, q0, q_len, kv_len, rows, kstart, kend, nsplit);
  };
  using One = std::integral_constant<int, 1>;
  using Two = std::integral_constant<int, 2>;
  if constexpr (kNTOnly != 2) {
    if (nt == 1) {
      if constexpr (kLean) {
        if (paged) return run(One{}, std::true_type{});
      }
      return run(One{}, std::false_type{});
    }
  }
  if constexpr (kNTOnly != 1) {
    if constexpr (kLean) {
      if (paged) return run(Two{}, std::true_type{});
    }
    run(Two{}, std::false_type{});
  }
}

// VIREO_FP8_DECODE (A/B runs): 0 = the mma.sync decode shape widening its tiles to f16 in shared memory
// (attention_mma.cu's attention_mma_kernel with C = KvFp8); 10 x stages + key tiles a chunk = this kernel in
// that form, lean: 31 (the default: 3 stages of 16 keys; 48 KB at D 128), 41, 22, 32, 42; 30 = 31 not lean
// (session 48's default). On an H100 (session 40, before the lean forms), 256 x 1k H16/8: 211.6 / 212.2 /
// 212.1 / 226.6 us for 31 / 41 / 22 / 32; batch 1 x 1k: 7.3 / 7.6 / 8.9 / 9.1 us; 4 x 32 keys (1 block an
// SM) 348 us: resident warps matter more than the bytes each has in flight.
int fp8_decode_mode() {
  static const int mode = [] {
    const char* v = std::getenv("VIREO_FP8_DECODE");
    if (v == nullptr) return 31;
    const int n = std::atoi(v);
    return n == 0 || n == 30 || n == 42 || n == 22 || n == 32 || n == 41 ? n : 31;
  }();
  return mode;
}

template <typename T, int D, int kSt, int kKT, bool kLean, int kNTOnly>
int decode_fp8_blocks_per_sm_form() {
  static const int n = [] {
    constexpr size_t smem = decode_fp8_smem_bytes<D, kSt, kKT, kLean>();
    static_assert(smem >= (4 * 16 * D + 2 * 4 * 16) * sizeof(float), "warp merge must fit in the stages");
    static_assert(smem >= (16 * kMaxDecodeSplits + 16) * sizeof(float), "split merge must fit in the stages");
    auto* kernel = attention_decode_fp8_kernel<T, D, kSt, kKT, kLean, kNTOnly>;
    VIREO_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    int b = 0;
    VIREO_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, kernel, kThreads, smem));
    return b < 1 ? 1 : b;
  }();
  return n;
}

template <typename T, int D, int kSt, int kKT, bool kLean, int kNTOnly>
void launch_decode_fp8_form(const MmaArgs& a, dim3 grid, cudaStream_t stream) {
  decode_fp8_blocks_per_sm_form<T, D, kSt, kKT, kLean, kNTOnly>();  // sets the shared-memory attribute
  launch_pdl(attention_decode_fp8_kernel<T, D, kSt, kKT, kLean, kNTOnly>, grid, dim3(kThreads),
             decode_fp8_smem_bytes<D, kSt, kKT, kLean>(), stream, a);
}

// Calls f(std::integral_constant stages, key tiles, lean) for the form fp8_decode_mode() names.
template <typename F>
auto with_fp8_decode_form(F&& f) {
  using std::integral_constant;
  using Lean = std::true_type;
  switch (fp8_decode_mode()) {
    case 42: return f(integral_constant<int, 4>{}, integral_constant<int, 2>{}, Lean{});
    case 22: return f(integral_constant<int, 2>{}, integral_constant<int, 2>{}, Lean{});
    case 32: return f(integral_constant<int, 3>{}, integral_constant<int, 2>{}, Lean{});
    case 41: return f(integral_constant<int, 4>{}, integral_constant<int, 1>{}, Lean{});
    case 30: return f(integral_constant<int, 3>{}, integral_constant<int, 1>{}, std::false_type{});
    default: return f(integral_constant<int, 3>{}, integral_constant<int, 1>{}, Lean{});
  }
}

// Blocks of the FP8 decode kernel resident per SM (also sets the shared-memory attribute). Lean forms: of
// the <= 8-row kernel, or of the 9-16-row one when only that one runs (GQA ratios above 8: it needs ~195
// registers, so fewer blocks fit and the split plan must not count on the other's slots).
template <typename T, int D>
int decode_fp8_blocks_per_sm(bool only_over8 = false) {
  return with_fp8_decode_form([only_over8](auto st, auto kt, auto lean) {
    constexpr int kSt = decltype(st)::value, kKT = decltype(kt)::value;
    if constexpr (decltype(lean)::value) {
      return only_over8 ? decode_fp8_blocks_per_sm_form<T, D, kSt, kKT, true, 2>()
                        : decode_fp8_blocks_per_sm_form<T, D, kSt, kKT, true, 1>();
    } else {
      return decode_fp8_blocks_per_sm_form<T, D, kSt, kKT, false, 0>();
    }
  });
}

// Lean forms run row groups of <= 8 and of 9-16 rows as two kernels; the caller says which may occur
// (rows: q_len * group of a decode-shape sequence); each skips the other's blocks.
template <typename T, int D>
void launch_decode_fp8(const MmaArgs& a, dim3 grid, cudaStream_t stream, bool rows_upto8, bool rows_over8) {
  with_fp8_decode_form([&](auto st, auto kt, auto lean) {
    constexpr int kSt = decltype(st)::value, kKT = decltype(kt)::value;
    if constexpr (decltype(lean)::value) {
      if (rows_upto8) launch_decode_fp8_form<T, D, kSt, kKT, true, 1>(a, grid, stream);
      if (rows_over8) launch_decode_fp8_form<T, D, kSt, kKT, true, 2>(a, grid, stream);
    } else {
      launch_decode_fp8_form<T, D, kSt, kKT, false, 0>(a, grid, stream);
    }
    return 0;
  });
  check_launch("paged_attention fp8 decode");
}

}  // namespace
}  // namespace vireo::cuda
