// Synchronous offline generation over an AsyncEngine (vLLM's LLM class): submit a batch,
// let continuous batching run it, return one aggregated output per prompt, in input order.
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "engine/async_engine.h"

namespace vireo {

// RequestOutput accumulated over all of a request's deltas (token_ids, text, logprobs
// concatenated; finish fields from the last delta).
struct GenerateResult {
  std::vector<int32_t> prompt_token_ids;
  RequestOutput output;
};

// Appends a delta to an aggregate.
void accumulate_output(RequestOutput& agg, RequestOutput&& delta);

class LLM {
 public:
  explicit LLM(const EngineConfig& config);
  explicit LLM(std::unique_ptr<AsyncEngine> engine);
  ~LLM();

  // on_delta (optional) sees each streamed delta with the index of its prompt, in arrival order.
  using DeltaCallback = std::function<void(size_t index, const RequestOutput& delta)>;
  std::vector<GenerateResult> generate(const std::vector<std::vector<int32_t>>& prompts, const SamplingParams& params,
                                       const DeltaCallback& on_delta = {});
  std::vector<GenerateResult> generate(const std::vector<std::vector<int32_t>>& prompts,
                                       const std::vector<SamplingParams>& params, const DeltaCallback& on_delta = {});
  AsyncEngine& engine() { return *engine_; }

 private:
  std::unique_ptr<AsyncEngine> engine_;
  uint64_t next_id_ = 0;
};

}  // namespace vireo
