// A snapshot of the engine's counters and histograms, rendered by /metrics with vLLM's names.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace vireo {

struct Histogram {
  std::vector<double> bounds;    // upper bounds, ascending (le); +Inf implied
  std::vector<uint64_t> counts;  // per bucket, non-cumulative; size bounds.size() + 1
  double sum = 0.0;
  uint64_t count = 0;
  explicit Histogram(std::vector<double> b = {}) : bounds(std::move(b)), counts(bounds.size() + 1, 0) {}
  void observe(double v) {
    size_t i = 0;
    while (i < bounds.size() && v > bounds[i]) ++i;
    ++counts[i];
    sum += v;
    ++count;
  }
};

struct EngineStats {
  int num_requests_running = 0;
  int num_requests_waiting = 0;
  double kv_cache_usage = 0.0;        // 0..1
  int num_free_blocks = 0;
  int num_total_blocks = 0;
  uint64_t prefix_cache_queries = 0;  // tokens
  uint64_t prefix_cache_hits = 0;     // tokens
  uint64_t prompt_tokens_total = 0;
  uint64_t generation_tokens_total = 0;
  uint64_t num_preemptions_total = 0;
  uint64_t request_success_total = 0; // finished with stop or length
  Histogram time_to_first_token_seconds;
  Histogram inter_token_latency_seconds;
  Histogram e2e_request_latency_seconds;
  // LoRA (vllm:lora_requests_info): max_loras 0 when LoRA is off; the adapters of the running and the
  // waiting requests, by id (EngineCore) and by name (AsyncEngine::stats), distinct, in first-seen order.
  int max_loras = 0;
  std::vector<int32_t> running_lora_ids, waiting_lora_ids;
  std::vector<std::string> running_loras, waiting_loras;
  // Speculative decoding (vllm:spec_decode_*); spec_enabled false: not rendered.
  bool spec_enabled = false;
  uint64_t spec_num_drafts = 0, spec_num_draft_tokens = 0, spec_num_accepted_tokens = 0;
  std::vector<uint64_t> spec_accepted_per_pos;
};

}  // namespace vireo
