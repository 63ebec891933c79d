// vLLM's --speculative-config, n-gram (prompt lookup) drafts only: the engine proposes up to
// num_speculative_tokens tokens per running request by matching the context's last n tokens
// (prompt_lookup_min <= n <= prompt_lookup_max) against earlier text, runs them in the next step beside
// the request's real token, and keeps the leading drafts the target model's own samples agree with
// (EngineCore; Scheduler::update_from_output).
#pragma once
#include <string>

#include "engine/engine_stats.h"

namespace vireo {

struct SpeculativeConfig {
  std::string method;  // "" (off) or "ngram"
  int num_speculative_tokens = 0;
  int prompt_lookup_min = 0, prompt_lookup_max = 0;
  // No drafts while this many requests or more are running (0: always); large batches gain least.
  int disable_by_batch_size = 0;
  bool enabled() const { return !method.empty() && num_speculative_tokens > 0; }
  // From --speculative-config's JSON ("" -> off). Throws vireo::Error naming the field for other
  // methods (draft models, EAGLE, Medusa, MTP) and bad values.
  static SpeculativeConfig parse(const std::string& json);
};

// vLLM's "SpecDecoding metrics" line from the counters: mean acceptance length (tokens a drafted step,
// the target's own token included), drafts kept overall and per position; "" when drafts are off.
std::string spec_decode_summary(const EngineStats& s);

}  // namespace vireo
