// The sample op on the device (semantics: backend/op_params.h; oracle: backend/cpu/cpu_sampling.cc).
// Two kernels; each row takes one of two paths, decided on the device from its SamplingRow:
//
// Fast path (forced rows, greedy rows, plain temperature rows: no top-k/top-p/min-p, and top-k rows:
// 1 <= top_k <= 20 (< V) with any top-p/min-p; no penalty or mask entries). The row is split into
// chunks of kChunkStep * iters ids (2048 for small batches, 8192 when M * chunks would exceed ~2048
// blocks), one 256-thread block per (row, chunk):
//   chunk_kernel: each thread loads 8 ids per step into registers (16-byte loads when the rows are
//     16-byte aligned, scalar loads otherwise), then the block computes the chunk max c, the sums
//     sum(exp(l - c)) (-> log-softmax) and, for draw rows, sum(exp((l - c) / T)) (the tempered mass
//     relative to the chunk max, rescaled by exp((c - max) / T) in the merge), and the chunk's
//     top-K list (best first, ties by lower id; K >= 1 so list[0] is the argmax).
//   sample_kernel (one 512-thread block per row): merges the partials: max, lse, top-N (per-thread
//     lists over the C * K candidates, then the block merge), greedy = top[0]; a draw scans the
//     chunks' masses in id order for the chunk where the cumulative mass passes uniform * total,
//     then scans only that chunk's ids (exact e = exp((l - max) / T), as below) in id order.
//   Top-k rows: the support is within the k best raw logits (tempering is monotone), so chunk_kernel
//     keeps 20-lists for them (whatever N; the partials' lists have stride 20), sample_kernel merges
//     them to the row's top 20 and one warp does min-p (e >= min_p), top-k (rank in (x desc, id asc)),
//     top-p (smallest prefix reaching top_p * the kept mass) and the draw in id order (topk_draw),
//     with the slow path's arithmetic for x and e.
//   Plain batches (every row forced, greedy or plain temperature; N <= 1) merge in lean_sample_kernel
//   instead: 128 threads a row, fewer barriers and round trips (sampling_lean.cuh).
// The logits are streamed once (plus one chunk per drawn row from L2). Both kernels are launched
// with PDL (launch_pdl) and wait (pdl_enter) before their first read.
//
// Mid path (every other non-forced row: penalties/masks, top-k > 20, top-p without top-k, min-p), the
// default: penalty_kernel (rows with entries), chunk_kernel, hist_kernel, mid_chunk_kernel over all
// chunks of the row, then sample_kernel's mid_row; details in sampling_mid.cuh. The host's copy of the
// rows (SampleParams::host_rows), when given, skips the mid kernels for batches without such rows.
// A mid row whose boundary bins hold more than kCandCap ids (rows of very few distinct values) runs
// the slow path below instead; VIREO_SAMPLE_MID=0 turns the mid path off.
//
// Slow path (the mid path's fallback; every mid row when it is off): chunk_kernel skips them and the same
// sample_kernel block runs the full single-block algorithm over the row, streamed from memory (L2
// after the first pass) once per pass, 16 bytes per lane:
//   1. raw pass: online max/sum-exp (-> log-softmax), per-thread top-K lists (-> top-N logprobs and
//      the greedy argmax), and for rows with penalties/masks an fp32 copy into workspace scratch;
//   2. penalised rows: penalty entries and masks applied to the copy, one more pass for max/argmax/min;
//   3. sampling rows: top-k and then top-p each become a threshold (x*, id*) in the order (value desc,
//      id asc) over x = (l - max) / T: kept iff x > x* or (x == x* and id <= id*). Found by a
//      histogram search: level 0 bins the value range in 2048 bins (count, and mass for top-p), a
//      suffix scan finds the bin where the k-th element / the top_p mass is reached, the next level
//      bins only that bin's members, until the boundary is one value; ties there are resolved by
//      finding the j-th tie in id order. min-p is the explicit e >= min_p (e = exp(x), e_max = 1).
//      Top-p masses are fixed point (e * 2^40 in u64, as the mid path's): float sums of the ~1e5 equal
//      terms of a flat row's tie group drift by ~1e-3 and put the boundary tens of ids off.
//   4. the draw: per-segment sums of the kept e (segment = 32 lanes x 16 bytes), a block scan over the
//      segments finds the one where the cumulative mass passes uniform * total, one warp scans it.
// No host synchronisation; ranges read from the rows are clamped on the device.
#include <algorithm>
#include <cstdlib>
#include <cfloat>
#include <climits>
#include <string>
#include <cstring>

#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/sampling_block.cuh"
#include "backend/cuda/sampling_args.cuh"
#include "backend/cuda/sampling_slow.cuh"
#include "backend/cuda/sampling_fast.cuh"
#include "backend/cuda/sampling_lean.cuh"
#include "backend/cuda/sampling_stats.cuh"
#include "backend/cuda/sampling_mid.cuh"
#include "backend/cuda/sampling_rank.cuh"

namespace vireo::cuda {
namespace sampling {
namespace {

// kPlain: every row is forced, greedy or plain temperature (chunk_kernel's kPlain): only fast_row's code.
template <typename T, int K, bool kPlain = false>
__global__ void __launch_bounds__(kThreads) sample_kernel(Args a) {
  __shared__ Shared sm;
  extern __shared__ __align__(16) float seg_sums[];  // mid rows: C u64 chunk masses
  pdl_enter();  // chunk_kernel's partials (or the logits' producer) complete before any read
  const int r = blockIdx.x;
  const SamplingRow row = a.rows[r];
  if constexpr (kPlain) {
    fast_row<T, K, true>(a, r, row, sm);
    return;
  }
  if (a.pmax && is_fast(row, a)) {
    if (K < kMaxTop && is_topk_row(row, a)) fast_row<T, kMaxTop>(a, r, row, sm);
    else fast_row<T, K>(a, r, row, sm);
  } else if (a.pmax && is_mid(row, a)) {
    mid_row<T, K>(a, r, row, sm, seg_sums);
  } else slow_row<T, K>(a, r, row, sm, seg_sums);
}

// The plain launch (kPlain kernels): the two fast-path kernels without the other paths' code; with
// lists of one (N <= 1) and `lean`, the merge is lean_sample_kernel (sampling_lean.cuh).
template <typename T, int K>
void launch_plain(const Args& a, int m, int iters, bool lean, cudaStream_t stream) {
  const int blocks = m * a.num_chunks;
  if (iters == 1) launch_pdl(chunk_kernel<T, K, 1, true>, dim3(blocks), dim3(kChunkThreads), 0, stream, a);
  else launch_pdl(chunk_kernel<T, K, 4, true>, dim3(blocks), dim3(kChunkThreads), 0, stream, a);
  check_launch("sample chunk_kernel");
  if constexpr (K == 1) {
    if (lean) {
      if (iters == 1) launch_pdl(lean_sample_kernel<T, 1>, dim3(m), dim3(kLeanThreads), 0, stream, a);
      else launch_pdl(lean_sample_kernel<T, 4>, dim3(m), dim3(kLeanThreads), 0, stream, a);
      check_launch("sample lean_sample_kernel");
      return;
    }
  }
  launch_pdl(sample_kernel<T, K, true>, dim3(m), dim3(kThreads), 0, stream, a);
  check_launch("sample_kernel");
}

template <typename T, int K>
void launch_for(const Args& a, int m, int iters, size_t dyn, cudaStream_t stream) {
  // Dynamic shared memory beyond 48 KB (vocabularies past ~350k) needs the opt-in, once per kernel.
  static const bool opted = [] {
    check(cudaFuncSetAttribute(sample_kernel<T, K>, cudaFuncAttributeMaxDynamicSharedMemorySize, 96 * 1024),
          "cudaFuncSetAttribute(sample_kernel)");
    return true;
  }();
  (void)opted;
  const int blocks = m * a.num_chunks;
  if (a.plan && a.pen_bits) {
    launch_pdl(penalty_kernel<T>, dim3(m), dim3(kThreads), 0, stream, a);
    check_launch("sample penalty_kernel");
  }
  if (a.pmax) {
    if (iters == 1) launch_pdl(chunk_kernel<T, K, 1>, dim3(blocks), dim3(kChunkThreads), 0, stream, a);
    else launch_pdl(chunk_kernel<T, K, 4>, dim3(blocks), dim3(kChunkThreads), 0, stream, a);
    check_launch("sample chunk_kernel");
  }
  if (a.plan) {
    if (iters == 1) launch_pdl(hist_kernel<T, 1>, dim3(blocks), dim3(kChunkThreads), 0, stream, a);
    else launch_pdl(hist_kernel<T, 4>, dim3(blocks), dim3(kChunkThreads), 0, stream, a);
    check_launch("sample hist_kernel");
    if (iters == 1) launch_pdl(mid_chunk_kernel<T, 1>, dim3(blocks), dim3(kChunkThreads), 0, stream, a);
    else launch_pdl(mid_chunk_kernel<T, 4>, dim3(blocks), dim3(kChunkThreads), 0, stream, a);
    check_launch("sample mid_chunk_kernel");
  }
  launch_pdl(sample_kernel<T, K>, dim3(m), dim3(kThreads), dyn, stream, a);
  check_launch("sample_kernel");
}

// Host mirror of is_fast / is_topk_row (sampling_fast.cuh) for one row of the caller's host copy: a plain
// row (forced, greedy, or temperature without top-k / top-p / min-p and without penalty or mask entries in
// range), a fast top-k row, or a row for the mid path.
enum class HostRow { kPlain, kTopK, kMid };
HostRow host_row_kind(const SamplingRow& row, int64_t vocab, int num_pairs, int num_masks, bool entries) {
  if (row.forced_token >= 0) return HostRow::kPlain;
  const int pb = std::max(row.penalty_begin, 0), pe = std::min(row.penalty_end, num_pairs);
  const int mb = std::max(row.mask_begin, 0), me = std::min(row.mask_end, num_masks);
  if (entries && (pe > pb || me > mb)) return HostRow::kMid;
  if (row.temperature < 1e-5f) return HostRow::kPlain;
  if (row.top_k >= 1 && row.top_k <= kMaxTop && row.top_k < vocab) return HostRow::kTopK;
  if ((row.top_k > 0 && row.top_k < vocab) || row.top_p < 1.0f || row.min_p > 0.0f) return HostRow::kMid;
  return HostRow::kPlain;
}

// Whether any row may take the mid path. A wrong answer costs only speed: with the mid path off, such rows
// take the slow path.
bool any_mid_row(const SamplingRow* rows, int64_t m, int64_t vocab, int num_pairs, int num_masks, bool entries) {
  for (int64_t r = 0; r < m; ++r)
    if (host_row_kind(rows[r], vocab, num_pairs, num_masks, entries) == HostRow::kMid) return true;
  return false;
}

// Whether every row is plain. Must be exact on the side of "no": the kPlain kernels do not check the rows.
bool plain_rows_only(const SamplingRow* rows, int64_t m, int64_t vocab, int num_pairs, int num_masks, bool entries) {
  for (int64_t r = 0; r < m; ++r)
    if (host_row_kind(rows[r], vocab, num_pairs, num_masks, entries) != HostRow::kPlain) return false;
  return true;
}

// VIREO_SAMPLE_PLAIN=0: never the kPlain kernels (A/B).
bool plain_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("VIREO_SAMPLE_PLAIN");
    return !(v && std::string(v) == "0");
  }();
  return on;
}

// VIREO_SAMPLE_LEAN=0: plain batches keep the 512-thread sample_kernel (A/B).
bool lean_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("VIREO_SAMPLE_LEAN");
    return !(v && std::string(v) == "0");
  }();
  return on;
}

// Whether every row may take stats_sample_kernel: forced, greedy, or plain temperature exactly 1 (the
// statistics are untempered). Exact on the side of "no", as plain_rows_only (which the caller checks too).
bool stats_rows_only(const SamplingRow* rows, int64_t m) {
  for (int64_t r = 0; r < m; ++r)
    if (rows[r].forced_token < 0 && rows[r].temperature >= 1e-5f && rows[r].temperature != 1.0f) return false;
  return true;
}

// VIREO_SAMPLE_MID=0: mid path off (those rows take the single-block slow path), for A/B measurements.
bool mid_path_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("VIREO_SAMPLE_MID");
    return !(v && std::string(v) == "0");
  }();
  return on;
}

size_t align256(size_t b) { return (b + 255) / 256 * 256; }

}  // namespace
}  // namespace sampling

void launch_sample(const SampleParams& p, const WorkspaceFn& workspace, cudaStream_t stream,
                   bool batch_invariant) {
  using namespace sampling;
  if (p.logits.ndim() != 2) throw Error("sample: logits must be [M, V], got " + p.logits.shape_str());
  const int64_t m = p.logits.dim(0), vocab = p.logits.dim(1);
  const int n = p.num_top_logprobs;
  if (vocab <= 0 || vocab > (int64_t{96 * 1024 / 4} * 128)) throw Error("sample: vocabulary size out of range: " + p.logits.shape_str());
  if (n < 0 || n > kMaxTop || n > vocab) throw Error("sample: num_top_logprobs " + std::to_string(n) + " outside [0, min(20, V)]");
  if (p.rows.dtype != DType::kI32 || p.rows.numel() != m * int64_t(sizeof(SamplingRow) / 4))
    throw Error("sample: rows must be I32 [M * 14], got " + p.rows.shape_str());
  if (!p.penalty_tokens.empty() && (p.penalty_tokens.dtype != DType::kI32 || p.penalty_tokens.ndim() != 2 || p.penalty_tokens.dim(1) != 2))
    throw Error("sample: penalty_tokens must be I32 [E, 2], got " + p.penalty_tokens.shape_str());
  if (!p.mask_tokens.empty() && p.mask_tokens.dtype != DType::kI32) throw Error("sample: mask_tokens must be I32");
  if (p.out_tokens.dtype != DType::kI32 || p.out_tokens.numel() != m) throw Error("sample: out_tokens must be I32 [M]");
  if (!p.out_tokens_mirror.empty() && (p.out_tokens_mirror.dtype != DType::kI32 || p.out_tokens_mirror.numel() < m))
    throw Error("sample: out_tokens_mirror must be I32 [>= M]");
  if (p.out_logprobs.dtype != DType::kF32 || p.out_logprobs.numel() != m * (1 + n)) throw Error("sample: out_logprobs must be F32 [M, 1 + N]");
  if (n > 0 && (p.out_top_ids.dtype != DType::kI32 || p.out_top_ids.numel() != m * n)) throw Error("sample: out_top_ids must be I32 [M, N]");
  if (!p.out_ranks.empty() && (p.out_ranks.dtype != DType::kI32 || p.out_ranks.numel() != m))
    throw Error("sample: out_ranks must be I32 [M]");
  if (m == 0) return;
  Args a{};
  a.logits = p.logits.data;
  a.vocab = static_cast<int>(vocab);
  a.rows = static_cast<const SamplingRow*>(p.rows.data);
  a.pairs = p.penalty_tokens.empty() ? nullptr : p.penalty_tokens.ptr<int32_t>();
  a.num_pairs = p.penalty_tokens.empty() ? 0 : static_cast<int>(p.penalty_tokens.dim(0));
  a.masks = p.mask_tokens.empty() ? nullptr : p.mask_tokens.ptr<int32_t>();
  a.num_masks = p.mask_tokens.empty() ? 0 : static_cast<int>(p.mask_tokens.numel());
  // Workspace (one call): [scratch][fast-path partials]. Any row may have penalties (the host does
  // not read the rows): scratch for all M rows when penalty or mask entries exist; only penalised
  // rows touch theirs.
  const int list_k = n <= 1 ? 1 : n <= 5 ? 5 : kMaxTop;  // the K of the top lists (>= 1: the argmax)
  // Chunks of 2048 ids while that gives <= ~2048 blocks (small batches: many blocks per row), else 8192.
  // Batch-invariant mode: always 8192 (the chunking sets the order of the row's sums).
  const int64_t small_chunks = (vocab + kChunkStep - 1) / kChunkStep;
  const int iters = !batch_invariant && m * small_chunks <= 2048 ? 1 : 4;
  a.chunk = kChunkStep * iters;
  a.num_chunks = static_cast<int>((vocab + a.chunk - 1) / a.chunk);
  const bool entries = a.pairs || a.masks;
  const size_t scratch_bytes = entries ? static_cast<size_t>(m * vocab) * sizeof(float) : 0;
  const size_t scratch_rounded = align256(scratch_bytes);
  const size_t parts = static_cast<size_t>(m) * a.num_chunks;
  // Top lists with stride kMaxTop: top-k rows keep kMaxTop per chunk whatever N is.
  const size_t part_bytes = align256(parts * (3 + kMaxTop) * sizeof(float) + parts * kMaxTop * sizeof(int32_t));
  // Mid path buffers, when some row may need them (all rows when the caller gave no host copy).
  const bool mid = mid_path_enabled() &&
                   (!p.host_rows || any_mid_row(static_cast<const SamplingRow*>(p.host_rows), m, vocab, a.num_pairs,
                                                a.num_masks, entries));
  a.bit_words = static_cast<int>((vocab + 31) / 32);
  const size_t mu = static_cast<size_t>(m);
  const size_t mid_sizes[] = {
      align256(parts * sizeof(float)),                                  // pwmax
      align256(parts * sizeof(int32_t)),                                // pwarg
      align256(parts * sizeof(unsigned long long)),                     // pmass
      align256(mu * kHistBins * sizeof(unsigned)),                      // hist_count
      align256(mu * kHistBins * sizeof(unsigned long long)),            // hist_mass
      align256(mu * sizeof(unsigned)),                                  // arrivals
      align256(mu * sizeof(unsigned)),                                  // cand_count
      align256(mu * sizeof(MidPlan)),                                   // plan
      align256(mu * kCandCap * sizeof(uint2)),                          // cand
      entries ? align256(mu * a.bit_words * sizeof(uint32_t)) : 0,      // pen_bits
  };
  size_t mid_bytes = 0;
  if (mid)
    for (size_t b : mid_sizes) mid_bytes += b;
  char* ws = static_cast<char*>(workspace(scratch_rounded + part_bytes + mid_bytes));
  if (scratch_bytes) a.scratch = reinterpret_cast<float*>(ws);
  float* pf = reinterpret_cast<float*>(ws + scratch_rounded);
  a.pmax = pf;
  a.psum = pf + parts;
  a.ptsum = pf + 2 * parts;
  a.ptop_v = pf + 3 * parts;
  a.ptop_i = reinterpret_cast<int32_t*>(pf + (3 + kMaxTop) * parts);
  if (mid) {
    char* at = ws + scratch_rounded + part_bytes;
    auto take = [&](size_t i) {
      char* q = at;
      at += mid_sizes[i];
      return q;
    };
    a.pwmax = reinterpret_cast<float*>(take(0));
    a.pwarg = reinterpret_cast<int32_t*>(take(1));
    a.pmass = reinterpret_cast<unsigned long long*>(take(2));
    a.hist_count = reinterpret_cast<unsigned*>(take(3));
    a.hist_mass = reinterpret_cast<unsigned long long*>(take(4));
    a.arrivals = reinterpret_cast<unsigned*>(take(5));
    a.cand_count = reinterpret_cast<unsigned*>(take(6));
    a.plan = reinterpret_cast<MidPlan*>(take(7));
    a.cand = reinterpret_cast<uint2*>(take(8));
    a.pen_bits = entries ? reinterpret_cast<uint32_t*>(take(9)) : nullptr;
  }
  a.num_top = n;
  a.out_tokens = p.out_tokens.ptr<int32_t>();
  a.out_tokens_mirror = p.out_tokens_mirror.empty() ? nullptr : p.out_tokens_mirror.ptr<int32_t>();
  a.out_logprobs = p.out_logprobs.ptr<float>();
  a.out_top_ids = n > 0 ? p.out_top_ids.ptr<int32_t>() : nullptr;
  const size_t esize = dtype_size(p.logits.dtype);
  a.aligned = (reinterpret_cast<uintptr_t>(p.logits.data) & 15) == 0 && (vocab * esize) % 16 == 0;
  // fp32 segments are the most; the mid path's chunk masses (C u64) share the space.
  const size_t dyn = std::max(static_cast<size_t>((vocab + 127) / 128) * sizeof(float),
                              static_cast<size_t>(a.num_chunks) * sizeof(unsigned long long));
  const bool plain = plain_enabled() && p.host_rows &&
                     plain_rows_only(static_cast<const SamplingRow*>(p.host_rows), m, vocab, a.num_pairs, a.num_masks,
                                     entries);
  // The logits' RangeStats replace chunk_kernel for plain batches of temperature-1 rows with N <= 1
  // (sampling_stats.cuh), when their ranges are short enough for one scan of a block.
  const Tensor& rs = p.row_stats;
  const bool stats = plain && n <= 1 && !batch_invariant && !rs.empty() && rs.dtype == DType::kF32 &&
                     rs.ndim() == 3 && rs.dim(0) == m && rs.dim(2) == 4 && rs.dim(1) >= 1 &&
                     (vocab + rs.dim(1) - 1) / rs.dim(1) <= kStatsMaxRange &&
                     stats_rows_only(static_cast<const SamplingRow*>(p.host_rows), m);
  dispatch_float(p.logits.dtype, "sample: logits", [&](auto t) {
    using T = decltype(t);
    if (stats) {
      a.num_chunks = static_cast<int>(rs.dim(1));
      a.range_stats = static_cast<const float4*>(rs.data);
      launch_pdl(stats_sample_kernel<T>, dim3(static_cast<unsigned>(m)), dim3(kLeanThreads), 0, stream, a);
      check_launch("sample stats_sample_kernel");
      return;
    }
    if (plain) {
      // The lean merge sums in another order than sample_kernel: not in batch-invariant mode (whether a
      // batch is plain depends on its other rows).
      const bool lean = lean_enabled() && !batch_invariant;
      if (list_k == 1) launch_plain<T, 1>(a, static_cast<int>(m), iters, lean, stream);
      else if (list_k == 5) launch_plain<T, 5>(a, static_cast<int>(m), iters, lean, stream);
      else launch_plain<T, kMaxTop>(a, static_cast<int>(m), iters, lean, stream);
      return;
    }
    if (list_k == 1) launch_for<T, 1>(a, static_cast<int>(m), iters, dyn, stream);
    else if (list_k == 5) launch_for<T, 5>(a, static_cast<int>(m), iters, dyn, stream);
    else launch_for<T, kMaxTop>(a, static_cast<int>(m), iters, dyn, stream);
  });
  if (!p.out_ranks.empty()) {
    dispatch_float(p.logits.dtype, "sample: logits", [&](auto t) {
      using T = decltype(t);
      launch_pdl(rank_kernel<T>, dim3(static_cast<unsigned>(m)), dim3(kRankThreads), 0, stream,
                 static_cast<const T*>(p.logits.data), static_cast<int>(vocab), a.out_tokens, p.out_ranks.ptr<int32_t>());
    });
    check_launch("sample rank_kernel");
  }
}

}  // namespace vireo::cuda
