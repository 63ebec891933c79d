// Paged attention on the tensor cores (mma.sync m16n8k16, bf16/f16 in, fp32 accumulate) for head
// dims 64 and 128. Query rows are packed GQA-style: the rows of a block are (token, head-in-group)
// pairs of one sequence and one KV head, so each K/V tile is read once per KV head and serves all G
// query heads of the group. Two shapes of one kernel:
//   decode  (q_len * G <= 16): 16 rows; the 4 warps split each 64-key tile (16 keys each) and merge
//           at the end; blocks also split the sequence (flash-decoding) so one long sequence fills
//           the chip: each sequence is spread over all launched splits (>= 64 keys each), and the
//           last split block of a (seq, kv head) to finish merges the splits (arrival counter), so
//           decode needs no merge launch (the merge kernel remains for prefill splits and the
//           fallback when no counters are available).
//   prefill (q_len * G > 16):  64 rows (16 per warp) that share each 64-key tile; causal; optional
//           key splits for long chunked-prefill contexts.
// K/V tiles are gathered page by page with cp.async into padded shared memory, three stages deep.
// An FP8 cache (--kv-cache-dtype fp8): decode rows run attention_decode_fp8.cuh (codes straight into
// the mma fragments); prefill rows run the model-dtype kernels on widened pages (kv_fp8_gather.h).
// This kernel with C = KvFp8 remains for A/B runs: its decode shape (VIREO_FP8_DECODE=0) lands codes
// the same way as T rows and each warp widens its own keys' K, then V, to f16 rows in shared memory;
// VIREO_FP8_KV_MODE=3 widens the prefill shape's tiles in the kernel too.
#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_common.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_types.cuh"
#include "backend/cuda/attention_mma_common.cuh"
#include "backend/cuda/attention_split_plan.h"
#include "backend/cuda/attention_split_merge.cuh"
#include "backend/cuda/attention_decode_fp8.cuh"
#include "backend/cuda/attention_fused_prologue.cuh"
#include "backend/cuda/attention_prefill_wide.cuh"
#include "backend/cuda/attention_wgmma.cuh"
#include "backend/cuda/attention_wgmma_ws.cuh"
#include "backend/cuda/attention_decode_cluster.h"
#include "backend/cuda/attention_mma_kernel.cuh"
#include "backend/cuda/attention_overlap.h"
#include "backend/cuda/attention_sinks.h"
#include "backend/cuda/kv_fp8_gather.h"

namespace vireo::cuda {
namespace {

static_assert(kSplitPlanTileKeys == kBN, "the split planner counts tiles of kBN keys");

// VIREO_FP8_KV_MODE=3 (A/B runs of an FP8 cache): prefill rows widen every tile inside the mma.sync
// prefill shape instead of running the model-dtype kernels on widened pages (kv_fp8_gather.h).
bool fp8_prefill_in_kernel() {
  static const bool on = [] {
    const char* v = std::getenv("VIREO_FP8_KV_MODE");
    return v != nullptr && v[0] == '3';
  }();
  return on;
}

bool window_wide_enabled() {  // read per launch: tests switch it; VIREO_WINDOW_WIDE=0 is the plain kernel
  const char* v = std::getenv("VIREO_WINDOW_WIDE");
  return !(v && v[0] == '0');
}

// The fused prepare_attention is opt-in (VIREO_FUSED_ATTENTION=1): on the H200 it is bitwise equal
// to the two ops but measured slower in the decode chain (0.6B layer 30.9 vs 30.1 us, 8B 135.2 vs
// 132.3 us, tests/cuda_bench H_DecodeLayerChainInGraph; 0.6B decode 980 vs 1013 tok/s): the prologue
// (q/k norm + RoPE, a block barrier) sits on every block's critical path after the wait, where the
// separate qkv_prepare costs one short kernel boundary. VIREO_NO_FUSED_ATTENTION=1 still forces it off.
bool fused_prepare_disabled() {
  static const bool off = [] {
    const char* on = std::getenv("VIREO_FUSED_ATTENTION");
    const char* no = std::getenv("VIREO_NO_FUSED_ATTENTION");
    return !(on != nullptr && on[0] == '1') || (no != nullptr && no[0] == '1');
  }();
  return off;
}

template <typename T, int D>
int wide_blocks_per_sm() {
  static const int n = [] {
    constexpr size_t smem = wide_smem_bytes<T, D>();
    VIREO_CUDA_CHECK(cudaFuncSetAttribute(attention_prefill_wide_kernel<T, D>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    int b = 0;
    VIREO_CUDA_CHECK(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, attention_prefill_wide_kernel<T, D>, kThreads, smem));
    return b < 1 ? 1 : b;
  }();
  return n;
}

// Arrival counters of the in-kernel decode split merge, one buffer per (device, stream), zeroed once
// (stream-ordered) when first handed out and left zero by every launch (the merging block resets its
// counter). Launches on one stream are ordered (with PDL each kernel waits for its predecessor before
// touching memory, so transitively for the previous attention launch); launches on different streams
// never share counters. Buffers are never freed (32 KiB per stream ever used; a graph keeps the pointer).
constexpr int kCountersPerStream = 8192;

// The counters for (current device, stream), or nullptr: more than kCountersPerStream (seq, kv head)
// pairs, or the stream is capturing a graph and has no counters yet (they cannot be zeroed eagerly
// then); the merge kernel merges the decode splits instead.
unsigned* split_counters(cudaStream_t stream, int64_t pairs) {
  if (pairs > kCountersPerStream) return nullptr;
  int dev = 0;
  VIREO_CUDA_CHECK(cudaGetDevice(&dev));
  struct Entry {
    int dev;
    cudaStream_t stream;
    unsigned* ctr;
  };
  static std::mutex mu;
  static std::vector<Entry> entries;
  std::lock_guard<std::mutex> lock(mu);
  for (const Entry& e : entries)
    if (e.dev == dev && e.stream == stream) return e.ctr;
  cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
  VIREO_CUDA_CHECK(cudaStreamIsCapturing(stream, &cap));
  if (cap != cudaStreamCaptureStatusNone) return nullptr;
  void* p = nullptr;
  VIREO_CUDA_CHECK(cudaMalloc(&p, kCountersPerStream * sizeof(unsigned)));
  VIREO_CUDA_CHECK(cudaMemsetAsync(p, 0, kCountersPerStream * sizeof(unsigned), stream));
  entries.push_back({dev, stream, static_cast<unsigned*>(p)});
  return static_cast<unsigned*>(p);
}

// VIREO_PREFILL_SEQ_LIST=0: the prefill grid of a mixed step over every sequence, not just the
// listed prefill sequences (AttentionParams::prefill_seqs), for same-call A/B runs.
bool prefill_list_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("VIREO_PREFILL_SEQ_LIST");
    return !(v && v[0] == '0');
  }();
  return on;
}

// VIREO_ATTN_LEGACY_SPLITS=1: decode key splits by waves alone (choose_splits), for same-call A/B runs.
bool legacy_decode_splits() {
  static const bool on = [] {
    const char* v = std::getenv("VIREO_ATTN_LEGACY_SPLITS");
    return v && v[0] == '1';
  }();
  return on;
}

// The decode shape's K / V rows by cp.async.bulk (bulk_kv_rows) at head dim 128, cp.async at 64. H200,
// test_cuda_bench B_DecodeAttention*: 256 x 1k H16/8 350 -> 301 us (76 -> 88% of HBM), 128 x 1k H32/8
// 75 -> 85%, 32 x 4k 82 -> 89%; at D 64 (128-byte rows, twice the requests per byte) 91 -> 77%.
// VIREO_DECODE_BULK=0 / 1: cp.async / bulk rows at every head dim (A/B runs).
bool decode_bulk_for(int head_dim) {
  static const int mode = [] {
    const char* v = std::getenv("VIREO_DECODE_BULK");
    return v == nullptr ? -1 : v[0] == '1' ? 1 : 0;
  }();
  return mode < 0 ? head_dim == 128 : mode == 1;
}

// Which shapes a launch_typed call runs: both (each kernel skips the other's sequences), or one.
enum class Shapes { kBoth, kDecodeOnly, kPrefillOnly };

// C: the cache's element type (T, or KvFp8: the mma.sync kernel's two shapes, no wgmma / wide prefill).
template <typename T, int D, typename C = T>
void launch_typed(const AttentionParams& p, MmaArgs a, const WorkspaceFn& workspace, const DeviceInfo& dev,
                  const AttentionTuning& tuning, cudaStream_t stream, Shapes shapes = Shapes::kBoth) {
  constexpr bool kFp8 = !std::is_same_v<C, T>;
  // wgmma prefill (attention_wgmma_ws.cuh; VIREO_ATTN_WS=0: attention_wgmma.cuh): the default
  // (VIREO_ATTN_WGMMA=0: mma.sync); 128 rows a block like the wide shape.
  const bool wgmma = !kFp8 && prefill_wgmma_wanted(tuning.prefill_wgmma);
  const bool wide = !kFp8 && (wgmma || tuning.prefill_m_tiles == 2);
  const int prefill_rows = wide ? 128 : 64;
  const int64_t num_tokens = p.q.numel() / (int64_t{p.num_heads} * D);
  const int g = a.group;
  const int max_q = p.max_query_len > 0 ? p.max_query_len : static_cast<int>(num_tokens);
  const int max_kv = p.max_seq_len > 0 ? p.max_seq_len : p.max_blocks_per_seq * p.block_size;
  // The prefill sequences, when the host listed them (the warp-specialised kernel's grid then runs
  // over just those: a serving step's decode sequences would otherwise be ~99% of its work items).
  const bool listed = prefill_list_enabled() && p.num_prefill_seqs >= 0 && wgmma && ws_config().on;
  const bool any_prefill = static_cast<int64_t>(max_q) * g > 16 && !(listed && p.num_prefill_seqs == 0) &&
                           shapes != Shapes::kDecodeOnly;
  const bool any_decode = !(p.num_seqs == 1 && any_prefill) && shapes != Shapes::kPrefillOnly;
  auto ceil_div = [](int64_t x, int64_t y) { return (x + y - 1) / y; };
  const int64_t sh = int64_t{p.num_seqs} * p.num_kv_heads;
  const int64_t sh_pre = listed ? int64_t{p.num_prefill_seqs} * p.num_kv_heads : sh;
  int dec_splits = 1, pre_splits = 1;
  const int row_tiles = static_cast<int>(ceil_div(int64_t{max_q} * g, prefill_rows));
  // Decode rows beside prefill rows: the prefill tiles fill the chip already unless they are few.
  // An FP8 cache's decode rows: attention_decode_fp8.cuh (VIREO_FP8_DECODE=0: the widening decode shape).
  const bool fp8_decode = kFp8 && fp8_decode_mode() != 0;
  const int64_t dec_slots =
      int64_t{dev.num_sms} * (fp8_decode ? decode_fp8_blocks_per_sm<T, D>(g > 8) : blocks_per_sm<T, D, 1, C>());
  // >= 256 keys a split, unless even 256-key splits leave resident slots idle (few (seq, kv head)
  // pairs, short contexts: batch-1 decode): then down to one 64-key tile a split.
  const int dec_min_keys = sh * ceil_div(max_kv, 256) < dec_slots ? kBN : 256;
  if (any_decode && (!any_prefill || int64_t{row_tiles} * sh_pre < dec_slots))
    dec_splits = legacy_decode_splits() ? choose_splits(sh, dec_slots, max_kv, dec_min_keys, kMaxDecodeSplits)
                                        : choose_decode_splits(sh, dec_slots, max_kv, dec_min_keys, kMaxDecodeSplits);
  const int64_t per_split_bytes = num_tokens * p.num_heads * (int64_t{D} * 4 + 8);
  if (any_prefill) {
    // The warp-specialised wgmma kernel (attention_wgmma_ws.cuh) runs one block an SM.
    const int per_sm = wgmma ? (ws_config().on ? 1 : wgmma_blocks_per_sm<T, D>())
                             : wide ? wide_blocks_per_sm<T, D>() : blocks_per_sm<T, D, 4, C>();
    // wgmma: one block per SM; a grid that fills the chip is not split (the waves model ignores that
    // causal row tiles differ in length; splits there only add partial traffic and the merge).
    if (!wgmma || int64_t{row_tiles} * sh_pre < int64_t{dev.num_sms} * per_sm)
      pre_splits = choose_splits(int64_t{row_tiles} * sh_pre, int64_t{dev.num_sms} * per_sm, max_kv, 512, 128);
    while (pre_splits > 1 && per_split_bytes * pre_splits > (int64_t{512} << 20)) --pre_splits;
  }
  const int dec_len = static_cast<int>(ceil_div(ceil_div(max_kv, dec_splits), kBN) * kBN);
  const int pre_len = static_cast<int>(ceil_div(ceil_div(max_kv, pre_splits), kBN) * kBN);
  dec_splits = static_cast<int>(ceil_div(max_kv, dec_len));
  pre_splits = static_cast<int>(ceil_div(max_kv, pre_len));
  a.splits_decode = dec_splits;
  a.splits_prefill = pre_splits;
  a.max_splits = std::max(dec_splits, pre_splits);
  // Decode: the minimum split length; the kernel spreads each sequence over all dec_splits splits
  // (decode_split_len), which gives dec_len at max_kv.
  a.split_len_decode = kBN;
  a.split_len_prefill = pre_len;
  if (a.max_splits > 1) {
    char* ws = static_cast<char*>(workspace(per_split_bytes * a.max_splits));
    a.ws_o = reinterpret_cast<float*>(ws);
    a.ws_ml = reinterpret_cast<float2*>(ws + num_tokens * p.num_heads * int64_t{a.max_splits} * D * 4);
  }
  if (dec_splits > 1) a.counters = split_counters(stream, sh);
  a.bulk_kv = !kFp8 && decode_bulk_for(D);
  if (any_decode) {
    const dim3 grid(1, static_cast<unsigned>(sh), dec_splits);
    if (fp8_decode) {
      // Row groups of 9-16 rows need a sequence of 2+ query tokens with q_len * g <= 16 (or g > 8).
      const int min_multi = p.min_multi_query_len;
      const bool over8 = g > 8 || (max_q > 1 && (min_multi < 0 || (min_multi > 0 && min_multi * g <= 16)));
      launch_decode_fp8<T, D>(a, grid, stream, g <= 8, over8);
    }
    else launch_shape<T, D, 1, C>(a, grid, stream);
  }
  if (any_prefill) {
    const dim3 grid(row_tiles, static_cast<unsigned>(sh), pre_splits);
    if constexpr (kFp8) {
      launch_shape<T, D, 4, C>(a, grid, stream);
    } else if (wgmma && ws_config().on) {
      MmaArgs pa = a;
      if (listed) pa.prefill_seqs = p.prefill_seqs.ptr<int>();
      launch_prefill_ws<T, D>(pa, dim3(row_tiles, static_cast<unsigned>(sh_pre), pre_splits), dev.num_sms,
                              p.k_cache.numel() / (int64_t{p.num_kv_heads} * D), num_tokens, stream);
    } else if (wgmma) {
      launch_prefill_wgmma<T, D>(a, grid, stream);
    } else if (wide) {
      wide_blocks_per_sm<T, D>();  // sets the shared-memory attribute
      launch_pdl(attention_prefill_wide_kernel<T, D>, grid, dim3(kThreads), wide_smem_bytes<T, D>(), stream, a);
      check_launch("paged_attention prefill");
    } else {
      launch_shape<T, D, 4>(a, grid, stream);
    }
  }
  if (pre_splits > 1 || (dec_splits > 1 && a.counters == nullptr)) {
    launch_pdl(attention_merge_kernel<T>, dim3(static_cast<unsigned>(num_tokens), p.num_heads), dim3(D),
               a.max_splits * sizeof(float), stream, a, D);
    check_launch("paged_attention merge");
  }
}

void check_attention(const AttentionParams& p) {
  if (p.num_heads <= 0 || p.num_kv_heads <= 0 || p.num_heads % p.num_kv_heads != 0 || p.head_dim <= 0)
    throw Error("paged_attention: bad num_heads/num_kv_heads/head_dim");
  const int64_t num_tokens = p.q.numel() / (int64_t{p.num_heads} * p.head_dim);
  if (p.q.numel() != num_tokens * p.num_heads * p.head_dim || p.out.numel() != p.q.numel())
    throw Error("paged_attention: q and out must be [T, H, D]");
  if ((p.k_cache.dtype != p.q.dtype && p.k_cache.dtype != DType::kF8E4M3) || p.v_cache.dtype != p.k_cache.dtype ||
      p.out.dtype != p.q.dtype)
    throw Error("paged_attention: q, caches and out must share one dtype (or the caches both be F8_E4M3)");
  if (p.query_start.dtype != DType::kI32 || p.seq_lens.dtype != DType::kI32 || p.block_tables.dtype != DType::kI32)
    throw Error("paged_attention: query_start, seq_lens, block_tables must be I32");
  checked_sinks(p, "paged_attention");
}

// The tensor-core kernels; prep: fused mode (decode-shape steps only, see MmaArgs::prep) or nullptr.
void launch_mma(const AttentionParams& p, const QkvArgs* prep, const WorkspaceFn& workspace, const DeviceInfo& dev,
                cudaStream_t stream, const AttentionTuning& tuning, const SideLane* side) {
  MmaArgs a = make_mma_args(p);
  if (prep) a.prep = *prep;
  auto typed = [&](auto tag) {
    using T = decltype(tag);
    auto run_on = [&](auto ctag, const AttentionParams& q, const MmaArgs& qa, Shapes shapes, const WorkspaceFn& ws,
                      cudaStream_t st, const DeviceInfo& d) {
      using C = decltype(ctag);
      if (q.head_dim == 64) launch_typed<T, 64, C>(q, qa, ws, d, tuning, st, shapes);
      else launch_typed<T, 128, C>(q, qa, ws, d, tuning, st, shapes);
    };
    auto run = [&](auto ctag, const AttentionParams& q, const MmaArgs& qa, Shapes shapes) {
      run_on(ctag, q, qa, shapes, workspace, stream, dev);
    };
    const int64_t num_tokens = p.q.numel() / (int64_t{p.num_heads} * p.head_dim);
    // The listed prefill rows on the side lane's persistent grid over pct% of the SMs, the decode rows
    // beside them on this stream (see the FP8 branch below for why).
    auto overlapped = [&](auto decode_tag, const AttentionParams& wp, int pct) {
      DeviceInfo pdev = dev;
      pdev.num_sms = std::max(1, dev.num_sms * pct / 100);
      VIREO_CUDA_CHECK(cudaEventRecord(side->fork, stream));
      VIREO_CUDA_CHECK(cudaStreamWaitEvent(side->stream, side->fork, 0));
      if (p.defer_decode_rows && side->deferred != nullptr) {
        // The decode rows on the side lane (its raised priority places their blocks first), left running:
        // the prefill rows here, and after them the caller's next ops on this stream, fill the other SMs.
        // With an SM partition the decode rows stay on its SMs and the prefill rows take all the others.
        const bool part = side->decode_stream != nullptr;
        cudaStream_t ds = part ? side->decode_stream : side->stream;
        DeviceInfo ddev = dev;
        if (part) {
          ddev.num_sms = side->decode_sms;
          pdev.num_sms = std::max(1, dev.num_sms - side->decode_sms);
          VIREO_CUDA_CHECK(cudaStreamWaitEvent(ds, side->fork, 0));
        }
        run_on(decode_tag, p, a, Shapes::kDecodeOnly, side->workspace, ds, ddev);
        run_on(T{}, wp, make_mma_args(wp), Shapes::kPrefillOnly, workspace, stream, pdev);
        VIREO_CUDA_CHECK(cudaEventRecord(part ? side->decode_join : side->join, ds));
        *side->deferred = true;
        return;
      }
      run_on(T{}, wp, make_mma_args(wp), Shapes::kPrefillOnly, side->workspace, side->stream, pdev);
      run(decode_tag, p, a, Shapes::kDecodeOnly);
      VIREO_CUDA_CHECK(cudaEventRecord(side->join, side->stream));
      VIREO_CUDA_CHECK(cudaStreamWaitEvent(stream, side->join, 0));
    };
    if (p.k_cache.dtype != DType::kF8E4M3) {
      // A model-dtype cache's mixed steps split as the FP8 cache's below (VIREO_ATTN_OVERLAP_BF16=0: in turn).
      const bool mixed = side != nullptr && side->stream != nullptr && p.num_prefill_seqs > 0 &&
                         p.num_prefill_seqs < p.num_seqs && model_dtype_overlap_enabled();
      if (const int pct = mixed ? prefill_sm_share(p, num_tokens) : 100; pct < 100) {
        overlapped(T{}, p, pct);
        return;
      }
      run(T{}, p, a, Shapes::kBoth);
      return;
    }
    // FP8 cache: decode rows read the codes (mma.sync, widened in shared memory); prefill rows run the
    // model-dtype kernels over a widened copy of their pages (kv_fp8_gather.h), unless VIREO_FP8_KV_MODE
    // asks the mma.sync kernel to widen them too (A/B runs).
    const int g = p.num_heads / p.num_kv_heads;
    const bool prefill = (p.max_query_len <= 0 || int64_t{p.max_query_len} * g > 16) && p.num_prefill_seqs != 0;
    if (!prefill || fp8_prefill_in_kernel()) {
      run(KvFp8{}, p, a, Shapes::kBoth);
      return;
    }
    // Labels for the op timer, on the main stream only (side-stream work has no place in its timeline).
    auto mark = [&](const char* label, cudaStream_t st) {
      if (side != nullptr && side->mark && st == stream) side->mark(label);
    };
    // The prefill rows over a widened copy of their pages; the copy may be made on another stream first.
    auto widened = [&](cudaStream_t st) {
      const KvFp8Widened w = widen_fp8_prefill_pages(p, st);
      mark("attention: FP8 prefill pages widened", st);
      AttentionParams wp = p;
      wp.k_cache = w.k_cache;
      wp.v_cache = w.v_cache;
      wp.block_tables = w.block_tables;
      return wp;
    };
    auto prefill_on = [&](const AttentionParams& wp, const WorkspaceFn& ws, cudaStream_t st, const DeviceInfo& d) {
      run_on(T{}, wp, make_mma_args(wp), Shapes::kPrefillOnly, ws, st, d);
    };
    auto prefill_rows = [&](const WorkspaceFn& ws, cudaStream_t st) { prefill_on(widened(st), ws, st, dev); };
    const int overlap = side != nullptr && side->stream != nullptr ? attention_overlap_mode() : 0;
    if (overlap == 0) {
      run(KvFp8{}, p, a, Shapes::kDecodeOnly);
      mark("attention: FP8 decode rows", stream);
      prefill_rows(workspace, stream);
      return;
    }
    if (const int pct = prefill_sm_share(p, num_tokens); pct < 100) {
      // The persistent prefill kernel on pct% of the SMs, the decode rows on the rest at the same time:
      // the prefill blocks (one an SM, all its shared memory) are launched first, on the side lane's
      // higher stream priority, and the decode rows' small blocks fill the SMs they leave, where a
      // full-chip prefill grid left the decode rows nothing until it drained (or, issued second, waited
      // for the decode blocks to drain from whole SMs). The pages are widened first, so both kernels
      // become ready together.
      overlapped(KvFp8{}, widened(stream), pct);
      return;
    }
    // The prefill rows (bound by FLOPs) on the side stream beside the decode rows (bound by HBM bandwidth):
    // each kernel alone leaves the other's resource mostly idle. Mode 1 issues the prefill rows first (their
    // blocks run longest: the decode blocks fill the SMs around them), 2 the decode rows first.
    VIREO_CUDA_CHECK(cudaEventRecord(side->fork, stream));
    VIREO_CUDA_CHECK(cudaStreamWaitEvent(side->stream, side->fork, 0));
    if (overlap == 1) prefill_rows(side->workspace, side->stream);
    run(KvFp8{}, p, a, Shapes::kDecodeOnly);
    if (overlap != 1) prefill_rows(side->workspace, side->stream);
    VIREO_CUDA_CHECK(cudaEventRecord(side->join, side->stream));
    VIREO_CUDA_CHECK(cudaStreamWaitEvent(stream, side->join, 0));
  };
  if (p.q.dtype == DType::kBF16) typed(__nv_bfloat16{});
  else typed(__half{});
}

}  // namespace

void launch_paged_attention(const AttentionParams& p, const WorkspaceFn& workspace, const DeviceInfo& dev,
                            cudaStream_t stream, const AttentionTuning& tuning, const SideLane* side) {
  check_attention(p);
  if (p.q.numel() == 0 || p.num_seqs == 0) return;
  if (p.k_cache.dtype == DType::kF8E4M3) {
    // FP8 cache: the mma.sync kernels (decode and prefill shapes) where they apply, else the plain kernel.
    if (p.window > 0 || p.softcap > 0.f || !p.sinks.empty() || !mma_supported(p)) launch_paged_attention_simple(p, stream);
    else launch_mma(p, nullptr, workspace, dev, stream, tuning, side);
    return;
  }
  if (p.window > 0 || p.softcap > 0.f || !p.sinks.empty()) {
    // Sliding-window, soft-capped (Gemma 2) and attention-sink (GPT-OSS) layers: the CUDA-core
    // flash-decoding kernel with each row's keys starting at its window (bf16/f16, head dims 64-256;
    // split over the window; sinks join its final combine), else the plain kernel (one warp per
    // (token, head): Gemma 3 1B 65.8 vs 603.7 decode tok/s, session 29). The tensor-core and cluster
    // kernels below take none of these. VIREO_WINDOW_WIDE=0: the plain kernel.
    if (window_wide_enabled() && decode_wide_supported(p)) launch_paged_attention_decode_wide(p, workspace, dev, stream);
    else launch_paged_attention_simple(p, stream);
    return;
  }
  if (!mma_supported(p)) {
    // Head dims 192 / 256 (bf16/f16): the CUDA-core flash-decoding kernel; F32 and other dims: simple.
    if (decode_wide_supported(p)) launch_paged_attention_decode_wide(p, workspace, dev, stream);
    else launch_paged_attention_simple(p, stream);
    return;
  }
  if (const int cluster = decode_cluster_size(p, dev, tuning.decode_cluster); cluster > 0) {
    launch_decode_cluster(p, nullptr, cluster, stream);
    return;
  }
  launch_mma(p, nullptr, workspace, dev, stream, tuning, side);
}

namespace {
// Whether qkv_prepare's work can run inside the decode attention kernel: decode-shape rows (the host
// hint max_query_len * G <= 16 the decode / prefill choice trusts as well), a tensor-core shape, a
// per-head norm, and both ops naming the same cache and shapes. Windows, soft-caps and sinks go to
// kernels without the fused prologue (launch_paged_attention): the two ops then.
bool prepare_fusable(const QkvPrepareParams& qp, const AttentionParams& p) {
  const int group = p.num_heads / p.num_kv_heads;
  return p.window == 0 && p.softcap == 0.f && p.sinks.empty() && mma_supported(p) && p.max_query_len > 0 &&
         p.k_cache.dtype == p.q.dtype &&  // an FP8 cache: the two ops (the prologues write 2-byte caches)
         int64_t{p.max_query_len} * group <= 16 &&
         qp.qk_norm != QkNorm::kFullWidth && qp.qkv.dtype == p.q.dtype && qp.k_cache.data == p.k_cache.data &&
         qp.v_cache.data == p.v_cache.data && qp.num_heads == p.num_heads && qp.num_kv_heads == p.num_kv_heads &&
         qp.head_dim == p.head_dim && qp.positions.numel() * p.num_heads * p.head_dim == p.q.numel();
}
}  // namespace

// Decode-shape steps with few (sequence, KV head) pairs: the cluster kernel with the preparation fused
// where that is faster or asked for (attention_decode_cluster.cu; VIREO_DECODE_CLUSTER=0 turns it off). Otherwise fused into the split
// decode kernel when VIREO_FUSED_ATTENTION=1 / tuning.fuse_prepare = 1 and the step is decode-shaped;
// otherwise the two ops in turn. Fused, q_out is not written.
void launch_prepare_attention(const QkvPrepareParams& qp, const AttentionParams& p, const WorkspaceFn& workspace,
                              const DeviceInfo& dev, cudaStream_t stream, const AttentionTuning& tuning,
                              const SideLane* side) {
  if (tuning.decode_cluster != 0 && tuning.fuse_prepare != 0 && p.num_heads > 0 && p.num_kv_heads > 0 &&
      p.num_heads % p.num_kv_heads == 0 && prepare_fusable(qp, p)) {
    if (const int cluster = decode_cluster_size(p, dev, tuning.decode_cluster);
        cluster > 0 && (tuning.fuse_prepare == 1 || decode_cluster_fuses_prepare(p))) {
      const QkvArgs prep = make_qkv_args(qp);
      check_attention(p);
      if (p.q.numel() == 0 || p.num_seqs == 0) return;
      launch_decode_cluster(p, &prep, cluster, stream);
      return;
    }
  }
  // Split-kernel fusion off (the default): the two ops, each validating its own params once.
  const bool want = tuning.fuse_prepare < 0 ? !fused_prepare_disabled() : tuning.fuse_prepare == 1;
  if (!want) {
    launch_qkv_prepare(qp, stream);
    launch_paged_attention(p, workspace, dev, stream, tuning, side);
    return;
  }
  const QkvArgs prep = make_qkv_args(qp);
  check_attention(p);
  if (!prepare_fusable(qp, p)) {
    launch_qkv_prepare(qp, stream);
    launch_paged_attention(p, workspace, dev, stream, tuning, side);
    return;
  }
  if (p.q.numel() == 0 || p.num_seqs == 0) return;
  launch_mma(p, &prep, workspace, dev, stream, tuning, side);
}

}  // namespace vireo::cuda
