// One generation request as the engine core sees it: tokens, progress, KV blocks, timing.
// Owned by the Scheduler (shared_ptr so the core can keep a finished one until it is reported).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "engine/penalty_entries.h"
#include "engine/request_output.h"
#include "engine/sampling_params.h"
#include "structured/grammar_matcher.h"

namespace vireo {

enum class RequestStatus { kWaiting, kRunning, kPreempted, kFinished };
enum class FinishReason { kNone, kStop, kLength, kAbort, kError };

const char* finish_reason_name(FinishReason r);  // "stop" | "length" | "abort" | "error" | ""

struct Request {
  Request(std::string id, std::vector<int32_t> prompt, SamplingParams sp, double arrival);

  std::string request_id;
  std::vector<int32_t> prompt_token_ids;
  std::vector<int32_t> output_token_ids;
  std::vector<int32_t> all_token_ids;  // prompt + output: what the KV cache must hold
  SamplingParams params;

  RequestStatus status = RequestStatus::kWaiting;
  FinishReason finish_reason = FinishReason::kNone;
  std::optional<int32_t> stop_token_id;  // a params.stop_token_ids entry that ended it
  std::string error;                     // finish_reason == kError
  bool error_from_request = false;       // caused by the request's own input (its grammar), not the engine

  // Tokens whose K/V are in the cache (prefix hits included). The scheduler hands out
  // num_tokens() - num_computed_tokens new tokens; 1 per step once decoding.
  int num_computed_tokens = 0;
  int num_cached_tokens = -1;  // prompt tokens served by the prefix cache at first admission
  int num_preemptions = 0;

  // KV cache: block ids in order (block i holds positions [i*bs, (i+1)*bs)), and the chained
  // hashes of the full blocks of all_token_ids computed so far (prefix caching).
  std::vector<int32_t> block_ids;
  std::vector<uint64_t> block_hashes;
  int num_hashed_cached_blocks = 0;  // leading blocks already registered in the prefix cache
  // Speculative decoding (--speculative-config): draft tokens proposed after the last step, to run beside
  // the request's next token in the coming one (Scheduler::schedule takes as many as fit).
  std::vector<int32_t> spec_token_ids;
  // Recurrent-state slot while running (models with Model::num_state_slots() > 0), else -1.
  int32_t state_slot = -1;

  // Per-request RNG when params.seed is set (same seed, same tokens regardless of batching).
  std::optional<std::mt19937_64> generator;

  // (id, output count) entries for repetition/presence/frequency penalties, synced by the sampling
  // batch builder only for requests with penalties (engine/sampling_batch.cc).
  PenaltyEntries penalty_entries;

  // Structured outputs: where the output tokens so far leave params.grammar (made by
  // EngineCore::add_request, advanced with every output token by Scheduler::update_from_output;
  // preemption keeps the output tokens, so it keeps this state too).
  std::unique_ptr<structured::GrammarMatcher> matcher;
  // Finished ("stop") because its last output token completed the grammar: that token is text, not
  // a stop token to leave out of the output.
  bool stopped_by_grammar = false;
  // False while the output is still reasoning (params.grammar_start_token not seen yet): no mask.
  bool grammar_active = true;
  // Set when this request's next-token mask could not be made (a grammar too costly to match): the
  // scheduler finishes it with this error after the step; the step's other requests go on.
  std::string grammar_error;

  // Prompt logprobs, filled as prefill chunks run; emitted once, with the first output.
  std::vector<std::optional<TokenLogprob>> prompt_logprobs;
  bool prompt_logprobs_sent = false;

  // Pooling runner: the sum (MEAN) or the row (LAST, CLS) of the prompt's final hidden states so far.
  std::vector<double> pooled;
  int num_pooled = 0;

  // Timing (seconds on a monotonic clock) for metrics; arrival_time also orders the priority policy.
  double arrival_time = 0.0;
  uint64_t arrival_seq = 0;  // set by Scheduler::add_request: breaks arrival_time ties (priority policy)
  double first_scheduled_time = -1.0;
  double first_token_time = -1.0;
  double last_token_time = -1.0;

  int num_tokens() const { return static_cast<int>(all_token_ids.size()); }
  int num_prompt_tokens() const { return static_cast<int>(prompt_token_ids.size()); }
  int num_output_tokens() const { return static_cast<int>(output_token_ids.size()); }
  bool is_finished() const { return status == RequestStatus::kFinished; }
  void append_output_token(int32_t id) {
    output_token_ids.push_back(id);
    all_token_ids.push_back(id);
  }
};

}  // namespace vireo
