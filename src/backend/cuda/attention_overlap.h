// How an FP8-cache mixed step runs its prefill rows beside its decode rows (launch_mma in attention_mma.cu):
// on a second stream (VIREO_ATTN_OVERLAP), the prefill rows' persistent grid on a share of the SMs chosen
// from the step's work (prefill_sm_share), so the decode rows' blocks fill the rest at the same time.
#pragma once
#include <algorithm>
#include <cstdlib>

#include "backend/op_params.h"

namespace vireo::cuda {

// VIREO_ATTN_OVERLAP: an FP8-cache step's prefill rows on the caller's side lane beside its decode rows.
// 1 (default): prefill issued first; 2: decode first; 0: both in turn on the one stream.
inline int attention_overlap_mode() {
  static const int mode = [] {
    const char* v = std::getenv("VIREO_ATTN_OVERLAP");
    return v == nullptr || v[0] < '0' || v[0] > '2' ? 1 : v[0] - '0';
  }();
  return mode;
}

// VIREO_ATTN_PREFILL_SM_PCT: the share of the SMs the prefill rows' persistent grid takes beside the decode
// rows (launch_mma's overlap); 1-100 fixed (100: the whole chip, as before session 46), unset or 0: by the
// step's work (prefill_sm_share).
inline int attention_prefill_sm_pct_env() {
  static const int pct = [] {
    const char* v = std::getenv("VIREO_ATTN_PREFILL_SM_PCT");
    const int x = v ? std::atoi(v) : 0;
    return x >= 1 && x <= 100 ? x : 0;
  }();
  return pct;
}

// A model-dtype (BF16 / F16) cache's mixed steps overlap too (default since session 47: H100, the mixed
// bench's 228 decode rows + 1k + 796-token prompts 435.4 -> 402.9 us; serving +0.3% (8B) / +0.7% (0.6B) in
// one call); VIREO_ATTN_OVERLAP_BF16=0 runs both parts in turn on one stream.
inline bool model_dtype_overlap_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("VIREO_ATTN_OVERLAP_BF16");
    return v == nullptr || v[0] != '0';
  }();
  return on;
}

// The prefill rows' share of the SMs (percent) in a step of decode rows beside prompts (FP8 or BF16 cache):
// their estimated time alone over both parts' (decode K / V bytes at ~2.6 TB/s, causal prefill FLOPs at ~200
// TFLOP/s: what each reaches alone on an H100 at these sizes), plus 25 points, within [30, 90] (the whole
// chip where the decode rows are under a tenth of the work: 90% would cost the prefill rows more). The margin
// is there because the decode rows are bound by HBM bandwidth, which fewer SMs still nearly saturate, while
// the prefill rows' time grows with 1 / SMs. Session 46, H100, the mixed-step bench (us, whole chip / best
// share): 228 decode rows + a 1k and a 796-token prompt 277.2 / 263.6 at 50% (this rule: ~54%); 240 decode
// rows + 7 x 1k prompts 490.9 / 474.9 at 80% (this rule: ~85%; 50% took 623.7).
inline int prefill_sm_share(const AttentionParams& p, int64_t num_tokens) {
  if (const int pct = attention_prefill_sm_pct_env(); pct > 0) return pct;
  if (p.num_prefill_seqs < 0) return 100;  // the prefill sequences were not listed: no estimate
  const double n_dec = std::max(0, p.num_seqs - p.num_prefill_seqs);
  const double prompt_tokens = std::max<double>(0, static_cast<double>(num_tokens) - n_dec);
  const double kv = p.max_seq_len > 0 ? p.max_seq_len : static_cast<double>(p.max_blocks_per_seq) * p.block_size;
  const double kv_bytes = p.k_cache.dtype == DType::kF8E4M3 ? 1.0 : 2.0;  // a K or V element
  const double dec_s = n_dec * kv * p.num_kv_heads * p.head_dim * 2.0 * kv_bytes / 2.6e12;
  const double pre_s = 4.0 * p.num_heads * p.head_dim * prompt_tokens * (kv / 2) / 2.0e14;
  // No decode rows, or too few to pay for the prefill rows' lost SMs: the whole chip (as before session 46).
  if (n_dec == 0 || pre_s + dec_s <= 0 || pre_s > 9 * dec_s) return 100;
  return std::clamp(static_cast<int>(100.0 * pre_s / (pre_s + dec_s)) + 25, 30, 90);
}

}  // namespace vireo::cuda
