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
// The logits are streamed once (plus one chunk per drawn row from L2). Both kernels are launched
// with PDL (launch_pdl) and wait (pdl_enter) before their first read.
//
// Slow path (rows with threshold searches or penalties/masks): chunk_kernel skips them and the same
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
//   4. the draw: per-segment sums of the kept e (segment = 32 lanes x 16 bytes), a block scan over the
//      segments finds the one where the cumulative mass passes uniform * total, one warp scans it.
// No host synchronisation; ranges read from the rows are clamped on the device.
#include <algorithm>
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

namespace vireo::cuda {
namespace sampling {
namespace {

template <typename T, int K>
__global__ void __launch_bounds__(kThreads) sample_kernel(Args a) {
  __shared__ Shared sm;
  extern __shared__ float seg_sums[];
  pdl_enter();  // chunk_kernel's partials (or the logits' producer) complete before any read
  const int r = blockIdx.x;
  const SamplingRow row = a.rows[r];
  if (a.pmax && is_fast(row, a)) {
    if (K < kMaxTop && is_topk_row(row, a)) fast_row<T, kMaxTop>(a, r, row, sm);
    else fast_row<T, K>(a, r, row, sm);
  } else slow_row<T, K>(a, r, row, sm, seg_sums);
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
  if (a.pmax) {
    const int blocks = m * a.num_chunks;
    if (iters == 1) launch_pdl(chunk_kernel<T, K, 1>, dim3(blocks), dim3(kChunkThreads), 0, stream, a);
    else launch_pdl(chunk_kernel<T, K, 4>, dim3(blocks), dim3(kChunkThreads), 0, stream, a);
    check_launch("sample chunk_kernel");
  }
  launch_pdl(sample_kernel<T, K>, dim3(m), dim3(kThreads), dyn, stream, a);
  check_launch("sample_kernel");
}

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
  if (p.out_logprobs.dtype != DType::kF32 || p.out_logprobs.numel() != m * (1 + n)) throw Error("sample: out_logprobs must be F32 [M, 1 + N]");
  if (n > 0 && (p.out_top_ids.dtype != DType::kI32 || p.out_top_ids.numel() != m * n)) throw Error("sample: out_top_ids must be I32 [M, N]");
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
  const size_t scratch_bytes = (a.pairs || a.masks) ? static_cast<size_t>(m * vocab) * sizeof(float) : 0;
  const size_t scratch_rounded = (scratch_bytes + 255) / 256 * 256;
  const size_t parts = static_cast<size_t>(m) * a.num_chunks;
  // Top lists with stride kMaxTop: top-k rows keep kMaxTop per chunk whatever N is.
  const size_t part_bytes = parts * (3 + kMaxTop) * sizeof(float) + parts * kMaxTop * sizeof(int32_t);
  char* ws = static_cast<char*>(workspace(scratch_rounded + part_bytes));
  if (scratch_bytes) a.scratch = reinterpret_cast<float*>(ws);
  float* pf = reinterpret_cast<float*>(ws + scratch_rounded);
  a.pmax = pf;
  a.psum = pf + parts;
  a.ptsum = pf + 2 * parts;
  a.ptop_v = pf + 3 * parts;
  a.ptop_i = reinterpret_cast<int32_t*>(pf + (3 + kMaxTop) * parts);
  a.num_top = n;
  a.out_tokens = p.out_tokens.ptr<int32_t>();
  a.out_logprobs = p.out_logprobs.ptr<float>();
  a.out_top_ids = n > 0 ? p.out_top_ids.ptr<int32_t>() : nullptr;
  const size_t esize = dtype_size(p.logits.dtype);
  a.aligned = (reinterpret_cast<uintptr_t>(p.logits.data) & 15) == 0 && (vocab * esize) % 16 == 0;
  const size_t dyn = static_cast<size_t>((vocab + 127) / 128) * sizeof(float);  // fp32 segments are the most
  dispatch_float(p.logits.dtype, "sample: logits", [&](auto t) {
    using T = decltype(t);
    if (list_k == 1) launch_for<T, 1>(a, static_cast<int>(m), iters, dyn, stream);
    else if (list_k == 5) launch_for<T, 5>(a, static_cast<int>(m), iters, dyn, stream);
    else launch_for<T, kMaxTop>(a, static_cast<int>(m), iters, dyn, stream);
  });
}

}  // namespace vireo::cuda
