#include "engine/llm.h"

#include <chrono>

#include "core/error.h"

namespace vireo {

void accumulate_output(RequestOutput& agg, RequestOutput&& d) {
  agg.request_id = d.request_id;
  agg.token_ids.insert(agg.token_ids.end(), d.token_ids.begin(), d.token_ids.end());
  agg.text += d.text;
  for (auto& lp : d.logprobs) agg.logprobs.push_back(std::move(lp));
  if (!d.prompt_logprobs.empty()) agg.prompt_logprobs = std::move(d.prompt_logprobs);
  agg.finished = d.finished;
  agg.finish_reason = d.finish_reason;
  agg.stop_string = d.stop_string;
  agg.stop_token_id = d.stop_token_id;
  agg.num_prompt_tokens = d.num_prompt_tokens;
  agg.num_output_tokens = d.num_output_tokens;
  agg.num_cached_tokens = d.num_cached_tokens;
  agg.error = d.error;
  agg.error_from_request = d.error_from_request;
  if (!d.embedding.empty()) agg.embedding = std::move(d.embedding);
}

LLM::LLM(std::unique_ptr<AsyncEngine> engine) : engine_(std::move(engine)) {}
LLM::~LLM() = default;

std::vector<GenerateResult> LLM::generate(const std::vector<std::vector<int32_t>>& prompts,
                                          const SamplingParams& params, const DeltaCallback& on_delta) {
  return generate(prompts, std::vector<SamplingParams>(prompts.size(), params), on_delta);
}

std::vector<GenerateResult> LLM::generate(const std::vector<std::vector<int32_t>>& prompts,
                                          const std::vector<SamplingParams>& params, const DeltaCallback& on_delta) {
  if (params.size() != prompts.size()) throw Error("LLM::generate: one SamplingParams per prompt expected");
  std::vector<GenerateResult> results(prompts.size());
  std::vector<std::shared_ptr<RequestStream>> streams;
  std::vector<std::string> ids;
  try {
    for (size_t i = 0; i < prompts.size(); ++i) {
      ids.push_back("llm-" + std::to_string(next_id_++));
      results[i].prompt_token_ids = prompts[i];
      streams.push_back(engine_->add_request(ids.back(), prompts[i], params[i]));
    }
  } catch (...) {
    for (auto& id : ids) engine_->abort(id);
    throw;
  }
  // Round-robin over the streams so on_delta sees deltas roughly as they are produced.
  std::vector<bool> done(prompts.size(), false);
  size_t num_done = 0;
  while (num_done < prompts.size()) {
    bool progressed = false;
    for (size_t i = 0; i < streams.size(); ++i) {
      if (done[i]) continue;
      while (auto d = streams[i]->next(std::chrono::milliseconds(0))) {
        progressed = true;
        if (on_delta) on_delta(i, *d);
        bool fin = d->finished;
        accumulate_output(results[i].output, std::move(*d));
        if (fin) {
          done[i] = true;
          ++num_done;
          break;
        }
      }
    }
    if (!progressed && num_done < prompts.size()) {
      // Block on the first unfinished stream briefly instead of spinning.
      for (size_t i = 0; i < streams.size(); ++i) {
        if (done[i]) continue;
        if (auto d = streams[i]->next(std::chrono::milliseconds(5))) {
          if (on_delta) on_delta(i, *d);
          bool fin = d->finished;
          accumulate_output(results[i].output, std::move(*d));
          if (fin) {
            done[i] = true;
            ++num_done;
          }
        }
        break;
      }
    }
  }
  return results;
}

}  // namespace vireo
