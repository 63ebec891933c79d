// The sample op's fast path (sampling.cu's header comment): chunk partials, the per-row merge, the
// chunk-scan draw and the top-k candidate draw. Private to sampling.cu.
#pragma once
#include <cfloat>
#include <climits>

#include "backend/cuda/pdl.cuh"
#include "backend/cuda/sampling_block.cuh"
#include "backend/cuda/sampling_args.cuh"
#include "backend/cuda/sampling_slow.cuh"  // Temper, Thr: the draw arithmetic both paths share

namespace vireo::cuda::sampling {
namespace {

// ---- fast path ----
constexpr int kChunkThreads = 256, kChunkWarps = kChunkThreads / 32;
constexpr int kPerThread = 8;                              // ids per thread per step
constexpr int kChunkStep = kChunkThreads * kPerThread;     // 2048 ids per chunk step

// Drawn rows with an active top-k of at most kMaxTop (any top-p/min-p): the support is within the row's
// kMaxTop best raw logits. Only meaningful for rows that pass is_fast.
__device__ __forceinline__ bool is_topk_row(const SamplingRow& row, const Args& a) {
  return row.forced_token < 0 && row.temperature >= 1e-5f && row.top_k >= 1 && row.top_k <= kMaxTop &&
         row.top_k < a.vocab;
}

// Rows the fast path handles (block-uniform: depends on the row only). Mirrors slow_row's decisions:
// forced rows; else no penalty/mask entries in range and greedy, top-k <= kMaxTop (any top-p/min-p;
// is_topk_row), or no top-k/top-p/min-p.
__device__ __forceinline__ bool is_fast(const SamplingRow& row, const Args& a) {
  if (row.forced_token >= 0) return true;
  const int pb = max(row.penalty_begin, 0), pe = min(row.penalty_end, a.num_pairs);
  const int mb = max(row.mask_begin, 0), me = min(row.mask_end, a.num_masks);
  if (a.scratch && (pe > pb || me > mb)) return false;
  if (row.temperature < 1e-5f) return true;
  if (is_topk_row(row, a)) return true;
  return !(row.top_k > 0 && row.top_k < a.vocab) && !(row.top_p < 1.0f) && !(row.min_p > 0.0f);
}

// Ids [base, base + 8) of a row as float; ids >= V read as -inf (callers also mask them by id).
template <typename T>
__device__ __forceinline__ void load8(const T* row, int V, bool aligned, int base, float (&out)[kPerThread]) {
  constexpr int kVec = vec_of<T>();
  if (aligned && base + kPerThread <= V) {
#pragma unroll
    for (int q = 0; q < kPerThread; q += kVec) {
      Vec<T> v;
      v.raw = *reinterpret_cast<const uint4*>(row + base + q);
#pragma unroll
      for (int j = 0; j < kVec; ++j) out[q + j] = to_f(v.v[j]);
    }
  } else {
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) out[j] = base + j < V ? to_f(row[base + j]) : neg_inf();
  }
}

// The partials of chunk c of fast row r, with top-K lists (K: kMaxTop for top-k rows). kSelect: the
// chunk list by K rounds of warp arg-best over the threads' values (a bitmask of taken values, no
// per-thread lists: fewer registers in the kernels for small K, whose other rows need few).
template <typename T, int K, int kIters, bool kSelect>
__device__ __forceinline__ void chunk_body(const Args& a, const SamplingRow& row, int r, int c, bool mid) {
  __shared__ float red_a[kChunkWarps], red_b[kChunkWarps];
  __shared__ float wtop_v[kChunkWarps][K];
  __shared__ int wtop_i[kChunkWarps][K];
  const int C = a.num_chunks;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, V = a.vocab;
  const T* p = static_cast<const T*>(a.logits) + static_cast<int64_t>(r) * V;
  const int base = c * (kIters * kChunkStep) + tid * kPerThread;
  float v[kIters][kPerThread];
#pragma unroll
  for (int it = 0; it < kIters; ++it) load8(p, V, a.aligned, base + it * kChunkStep, v[it]);

  // Chunk max (ids past V are -inf).
  float mx = neg_inf();
#pragma unroll
  for (int it = 0; it < kIters; ++it)
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) mx = fmaxf(mx, v[it][j]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  if (lane == 0) red_a[warp] = mx;
  __syncthreads();
  mx = red_a[0];
#pragma unroll
  for (int w = 1; w < kChunkWarps; ++w) mx = fmaxf(mx, red_a[w]);
  __syncthreads();  // red_a is rewritten below

  // Sums relative to the chunk max.
  // (top-k rows draw from their candidates: no tempered mass needed.)
  const bool draw = !mid && row.forced_token < 0 && row.temperature >= 1e-5f && !is_topk_row(row, a);
  const float inv_t = draw ? 1.0f / row.temperature : 0.0f;
  float s = 0.0f, ts = 0.0f;
  if (mx > neg_inf()) {
#pragma unroll
    for (int it = 0; it < kIters; ++it)
#pragma unroll
      for (int j = 0; j < kPerThread; ++j) {
        const float x = v[it][j];
        if (x > neg_inf()) {
          s += expf(x - mx);
          if (draw) ts += expf(__fmul_rn(__fsub_rn(x, mx), inv_t));
        }
      }
  }
  s = warp_sum(s);
  ts = warp_sum(ts);
  if (lane == 0) red_a[warp] = s, red_b[warp] = ts;

  // Top-K of the chunk: per-thread lists (or kSelect), K rounds of warp arg-best, then warp 0 over the
  // warps' lists.
  if constexpr (kSelect) {
    static_assert(kIters * kPerThread <= 32, "taken bitmask");
    float bv;
    int bi, bj;
    unsigned taken = 0u;
    auto rescan = [&] {  // this thread's best value not taken yet
      bv = neg_inf(), bi = INT_MAX, bj = -1;
#pragma unroll
      for (int it = 0; it < kIters; ++it)
#pragma unroll
        for (int j = 0; j < kPerThread; ++j) {
          const int id = base + it * kChunkStep + j, q = it * kPerThread + j;
          if (id < V && !((taken >> q) & 1u) && better(v[it][j], id, bv, bi)) bv = v[it][j], bi = id, bj = q;
        }
    };
    rescan();
    for (int q = 0; q < K; ++q) {
      float wv = bv;
      int wi = bi;
      warp_best(wv, wi);
      if (bj >= 0 && bi == wi) {  // ids are unique: one lane (none when the warp has nothing left)
        taken |= 1u << bj;
        rescan();
      }
      if (lane == 0) wtop_v[warp][q] = wv, wtop_i[warp][q] = wi;
    }
  } else {
    float lv[K];
    int li[K];
    top_init(lv, li);
#pragma unroll
    for (int it = 0; it < kIters; ++it)
#pragma unroll
      for (int j = 0; j < kPerThread; ++j) {
        const int id = base + it * kChunkStep + j;
        if (id < V) top_insert(lv, li, v[it][j], id);
      }
#pragma unroll
    for (int q = 0; q < K; ++q) {
      float bv;
      int bi;
      warp_pop_best(lv, li, bv, bi);
      if (lane == 0) wtop_v[warp][q] = bv, wtop_i[warp][q] = bi;
    }
  }
  __syncthreads();
  const int64_t pi = static_cast<int64_t>(r) * C + c;
  if (warp == 0) {
    if (lane == 0) {
      float st = 0.0f, tt = 0.0f;
      for (int w = 0; w < kChunkWarps; ++w) st += red_a[w], tt += red_b[w];
      a.pmax[pi] = mx, a.psum[pi] = st, a.ptsum[pi] = tt;
    }
    int h = 0;
    for (int q = 0; q < K; ++q) {
      const bool has = lane < kChunkWarps && h < K;
      float cv = has ? wtop_v[lane][h] : neg_inf();
      int ci = has ? wtop_i[lane][h] : INT_MAX;
      const int mine = ci;
      warp_best(cv, ci);
      if (has && mine == ci) ++h;
      if (lane == 0) a.ptop_v[pi * kMaxTop + q] = cv, a.ptop_i[pi * kMaxTop + q] = ci;
      if (mid && q == 0 && lane == 0) a.pwmax[pi] = cv, a.pwarg[pi] = ci;  // work row == raw row
    }
  }
  if (mid && a.pen_bits && a.scratch) {
    // Penalised mid rows (penalty_kernel's bits): the chunk's work max and argmax (lowest id) instead.
    const int pb = max(row.penalty_begin, 0), pe = min(row.penalty_end, a.num_pairs);
    const int mb = max(row.mask_begin, 0), me = min(row.mask_end, a.num_masks);
    if (pe > pb || me > mb) {
      __shared__ float wv_s[kChunkWarps];
      __shared__ int wi_s[kChunkWarps];
      const uint32_t* bits = a.pen_bits + static_cast<int64_t>(r) * a.bit_words;
      const float* ov = a.scratch + static_cast<int64_t>(r) * V;
      float bv = neg_inf();
      int bi = INT_MAX;
#pragma unroll
      for (int it = 0; it < kIters; ++it) {
        const int b0 = base + it * kChunkStep;
        const unsigned m = b0 < V ? (bits[b0 >> 5] >> (b0 & 31)) & 0xffu : 0u;
#pragma unroll
        for (int j = 0; j < kPerThread; ++j) {
          const int id = b0 + j;
          const float w = (m >> j) & 1u ? ov[id] : v[it][j];
          if (id < V && better(w, id, bv, bi)) bv = w, bi = id;
        }
      }
      warp_best(bv, bi);
      if (lane == 0) wv_s[warp] = bv, wi_s[warp] = bi;
      __syncthreads();
      if (tid == 0) {
        for (int w = 1; w < kChunkWarps; ++w)
          if (better(wv_s[w], wi_s[w], bv, bi)) bv = wv_s[w], bi = wi_s[w];
        a.pwmax[pi] = bv, a.pwarg[pi] = bi;  // after warp 0's write above (same thread: lane 0 of warp 0)
      }
    }
  }
}

// One block per (row, chunk): blockIdx.x = row * C + chunk. Partials of fast rows only. The kernels
// with small lists and 4 steps per thread are capped at 64 registers (>= 4 blocks per SM; their
// non-top-k rows need 48, the top-k rows' selection ~80 and spills a little instead).
// kPlain: the host saw that every row is forced, greedy or a plain temperature row (plain_rows_only): no
// mid, top-k or slow rows, so the kernel carries none of their code.
template <typename T, int K, int kIters, bool kPlain = false>
__global__ void __launch_bounds__(kChunkThreads, K < kMaxTop && kIters > 1 ? 4 : 1) chunk_kernel(Args a) {
  const int C = a.num_chunks, r = blockIdx.x / C, c = blockIdx.x - r * C;
  pdl_enter();  // before any read (logits, rows) and before the early return
  const SamplingRow row = a.rows[r];
  if constexpr (kPlain) {
    chunk_body<T, K, kIters, false>(a, row, r, c, false);
    return;
  }
  const bool fast = is_fast(row, a);
  // Mid rows (sampling_mid.cuh): raw partials with the N-list, work max/argmax, and the row's
  // histogram, arrival counter and candidate count zeroed for hist_kernel / mid_chunk_kernel.
  const bool mid = !fast && a.plan && row.forced_token < 0;
  if (!fast && !mid) return;  // the whole block
  if (mid) {
    const int64_t hb = static_cast<int64_t>(r) * 2048;
    for (int b = c * kChunkThreads + threadIdx.x; b < 2048; b += C * kChunkThreads)
      a.hist_count[hb + b] = 0u, a.hist_mass[hb + b] = 0ull;
    if (c == 0 && threadIdx.x == 0) a.arrivals[r] = 0u, a.cand_count[r] = 0u;
  }
  if (K < kMaxTop && fast && is_topk_row(row, a)) chunk_body<T, kMaxTop, kIters, true>(a, row, r, c, false);
  else chunk_body<T, K, kIters, false>(a, row, r, c, mid);
}

// Temperature draw of a fast row from the partials: the chunk where the cumulative (rescaled) mass
// passes uniform * total, then the id inside it. m: the row max (> -inf); fallback: an id in the support.
template <typename T>
__device__ int fast_draw(const Args& a, int r, const SamplingRow& row, float m, int fallback, Shared& sm) {
  const int tid = threadIdx.x, V = a.vocab, C = a.num_chunks;
  const float inv_t = 1.0f / row.temperature;
  const int64_t pb = static_cast<int64_t>(r) * C;
  auto mass = [&](int c) {
    const float pm = a.pmax[pb + c];
    return pm > neg_inf() ? a.ptsum[pb + c] * expf(__fmul_rn(__fsub_rn(pm, m), inv_t)) : 0.0f;
  };
  if (tid == 0) sm.sel_seg = INT_MAX, sm.last_seg = -1;
  // Each thread scans a run of consecutive chunks.
  const int per = (C + kThreads - 1) / kThreads;
  const int cb = min(tid * per, C), ce = min(cb + per, C);
  float local = 0.0f;
  for (int c = cb; c < ce; ++c) local += mass(c);
  float2 total;
  const float excl = block_excl_scan(make_float2(local, 0.0f), total, sm).x;  // syncs: sel_seg set
  const float target = row.uniform * total.x;
  const RunPick pick = pick_run(cb, ce, excl, target, mass, sm);
  const int c = pick.index;
  const float rr = pick.rem;
  if (c < 0) return fallback;  // block-uniform
  if (tid == 0) sm.picked = INT_MAX, sm.picked_last = -1;
  // The chunk's ids in id order: each thread a run of consecutive ids, a block scan of the runs.
  const T* p = static_cast<const T*>(a.logits) + static_cast<int64_t>(r) * V;
  const int lo = c * a.chunk, hi = min(V, lo + a.chunk);
  const int per_id = (a.chunk + kThreads - 1) / kThreads;
  const int ib = min(lo + tid * per_id, hi), ie = min(ib + per_id, hi);
  auto e_of = [&](int i) {
    const float v = to_f(p[i]);
    return v == neg_inf() ? 0.0f : expf(__fmul_rn(__fsub_rn(v, m), inv_t));
  };
  float ls = 0.0f;
  for (int i = ib; i < ie; ++i) ls += e_of(i);
  float2 tot2;
  float run = block_excl_scan(make_float2(ls, 0.0f), tot2, sm).x;  // syncs: picked* set
  int idx = -1, lastnz = -1;
  for (int i = ib; i < ie; ++i) {
    const float e = e_of(i);
    if (e > 0.0f) {
      lastnz = i;
      run += e;
      if (idx < 0 && run > rr) idx = i;
    }
  }
  if (idx >= 0) atomicMin(&sm.picked, idx);
  if (lastnz >= 0) atomicMax(&sm.picked_last, lastnz);
  __syncthreads();
  const int id = sm.picked != INT_MAX ? sm.picked : (sm.picked_last >= 0 ? sm.picked_last : fallback);
  __syncthreads();
  return id;
}

// The draw of a top-k row (is_topk_row) from the row's kMaxTop best raw logits in sm.top_v/top_i (best
// first, ties by lower id; sentinels INT_MAX / -inf), in warp 0 (lane j: candidate j), with the slow
// path's arithmetic: x = (l - max) / T, e = exp(x), min-p domain e >= min_p; the candidates ranked by
// (x desc, id asc) (the raw order up to ties that tempering creates); top-k keeps ranks < k of the
// domain, top-p the smallest prefix in rank order whose mass reaches top_p * the kept mass (at least
// one); the draw walks the kept candidates in id order: the first where the running mass exceeds
// uniform * kept mass, else the last kept. Nothing kept (min_p > 1): 0, as the slow path.
// m: the row max (> -inf). Block-uniform call (syncs).
__device__ int topk_draw(const SamplingRow& row, float m, Shared& sm) {
  const int tid = threadIdx.x, lane = tid & 31;
  if (tid < 32) {
    const Temper tp{m, 1.0f / row.temperature, row.min_p};
    const bool valid = lane < kMaxTop && sm.top_i[lane] != INT_MAX;
    const float v = valid ? sm.top_v[lane] : neg_inf();
    const int id = valid ? sm.top_i[lane] : INT_MAX;
    const float x = valid && v > neg_inf() ? tp.x(v) : neg_inf();
    const float e = valid ? tp.e(v) : 0.0f;
    const bool dom = valid && tp.domain(e);
    // Rank among the domain candidates (they are a prefix of the order: e is monotone in x).
    int rank = 0;
    for (int j = 0; j < kMaxTop; ++j) {
      const float xj = __shfl_sync(0xffffffffu, x, j);
      const int ij = __shfl_sync(0xffffffffu, id, j);
      const bool dj = __shfl_sync(0xffffffffu, dom, j);
      if (dj && better(xj, ij, x, id)) ++rank;
    }
    const bool kept_k = dom && rank < row.top_k;
    bool keep = kept_k;
    if (row.top_p < 1.0f) {
      // Mass before this candidate in rank order, and the total, over the top-k survivors.
      float before = 0.0f, total = 0.0f;
      for (int j = 0; j < kMaxTop; ++j) {
        const float ej = __shfl_sync(0xffffffffu, kept_k ? e : 0.0f, j);
        const int rj = __shfl_sync(0xffffffffu, rank, j);
        total += ej;
        if (rj < rank) before += ej;
      }
      keep = kept_k && (rank == 0 || before < row.top_p * total);
    }
    // The draw in id order: run = the kept mass of ids <= this id (summed in lane order, so it is
    // monotone in id: every sum adds a superset of nonnegative terms in the same order).
    const float w = keep ? e : 0.0f;
    float run = 0.0f, total = 0.0f;
    for (int j = 0; j < kMaxTop; ++j) {
      const float wj = __shfl_sync(0xffffffffu, w, j);
      const int ij = __shfl_sync(0xffffffffu, id, j);
      total += wj;
      if (ij <= id) run += wj;
    }
    const float target = row.uniform * total;
    const int hit = keep && run > target ? id : INT_MAX;
    const int lastk = keep ? id : -1;
    int first = hit, last = lastk;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      first = min(first, __shfl_xor_sync(0xffffffffu, first, o));
      last = max(last, __shfl_xor_sync(0xffffffffu, last, o));
    }
    if (lane == 0) sm.picked = first != INT_MAX ? first : (last >= 0 ? last : 0);
  }
  __syncthreads();
  const int token = sm.picked;
  __syncthreads();
  return token;
}

// The raw merge of row r's partials: (max, lse) of the log-softmax, the top-K into sm.top_v/top_i and
// the top-N outputs. Returns lse; m: the row max.
template <int K>
__device__ float merge_raw(const Args& a, int r, Shared& sm, float& m_out) {
  const int tid = threadIdx.x, C = a.num_chunks, n = a.num_top;
  const int64_t pb = static_cast<int64_t>(r) * C;
  // (max, sum-exp) merged online per thread, then over the block; the chunks' top lists into per-thread
  // lists (loads of both issued before the first barrier).
  float m = neg_inf(), s = 0.0f;
  for (int c = tid; c < C; c += kThreads) merge_online(m, s, a.pmax[pb + c], a.psum[pb + c]);
  float lv[K];
  int li[K];
  top_init(lv, li);
  for (int i = tid; i < C * K; i += kThreads) {
    const int c = i / K;
    const int64_t at = (pb + c) * kMaxTop + (i - c * K);
    const int id = a.ptop_i[at];
    if (id != INT_MAX) top_insert(lv, li, a.ptop_v[at], id);
  }
  block_online(m, s, sm);
  const float lse = m + logf(s);
  top_merge(lv, li, sm);
  for (int i = tid; i < n; i += kThreads) {
    a.out_logprobs[static_cast<int64_t>(r) * (1 + n) + 1 + i] = sm.top_v[i] - lse;
    a.out_top_ids[static_cast<int64_t>(r) * n + i] = sm.top_i[i];
  }
  m_out = m;
  return lse;
}

// A fast row from the partials of chunk_kernel. kPlain: not a top-k row (chunk_kernel's kPlain).
template <typename T, int K, bool kPlain = false>
__device__ void fast_row(const Args& a, int r, const SamplingRow& row, Shared& sm) {
  const int tid = threadIdx.x, V = a.vocab, n = a.num_top;
  float m;
  const float lse = merge_raw<K>(a, r, sm, m);
  const int best = sm.top_i[0] == INT_MAX ? 0 : sm.top_i[0];
  int token;
  if (row.forced_token >= 0) token = row.forced_token;
  else if (row.temperature < 1e-5f || !(m > neg_inf())) token = best;  // all -inf: 0, as slow_row
  else if (!kPlain && is_topk_row(row, a)) token = topk_draw(row, m, sm);
  else token = fast_draw<T>(a, r, row, m, best, sm);
  if (tid == 0) {
    const T* raw = static_cast<const T*>(a.logits) + static_cast<int64_t>(r) * V;
    a.out_tokens[r] = token;
    if (a.out_tokens_mirror) a.out_tokens_mirror[r] = token;
    a.out_logprobs[static_cast<int64_t>(r) * (1 + n)] =
        token >= 0 && token < V ? to_f(raw[token]) - lse : __int_as_float(0x7fc00000);
  }
}

}  // namespace
}  // namespace vireo::cuda::sampling
