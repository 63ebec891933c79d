// The engine requests behind one HTTP request: one per (prompt, choice) — the engine sees n=1,
// the server fans out n and varies a given seed per choice (seed + choice), as vLLM does.
// Polls the streams fairly, accumulates what each choice produced, and aborts whatever is
// unfinished when it is destroyed (client gone, handler error).
#pragma once
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/async_engine.h"
#include "server/server_context.h"

namespace vireo::server {

struct ChoiceState {
  int index = 0;         // choice index in the response: prompt_index * n + i
  int prompt_index = 0;
  std::string request_id;
  std::shared_ptr<RequestStream> stream;
  bool finished = false;
  std::string text;
  std::vector<int32_t> token_ids;
  std::vector<TokenLogprob> logprobs;
  std::vector<std::optional<TokenLogprob>> prompt_logprobs;
  std::string finish_reason;
  std::optional<std::string> stop_string;
  std::optional<int32_t> stop_token_id;
  int num_prompt_tokens = 0;
  int num_output_tokens = 0;
  int num_cached_tokens = 0;  // prompt tokens served from the prefix cache
  std::string error;
  bool error_from_request = false;  // RequestOutput::error_from_request
};

class ChoiceGroup {
 public:
  ChoiceGroup(ServerContext& ctx, std::shared_ptr<AsyncEngine> engine, std::string base_id)
      : ctx_(ctx), engine_(std::move(engine)), base_id_(std::move(base_id)) {}
  ~ChoiceGroup();
  ChoiceGroup(const ChoiceGroup&) = delete;
  ChoiceGroup& operator=(const ChoiceGroup&) = delete;

  // Adds n choices for one prompt. Engine rejections (vireo::Error) become ApiError 400 and
  // abort the choices already added.
  void add_prompt(int prompt_index, const std::vector<int32_t>& prompt_ids, const SamplingParams& params);

  // The next output of any unfinished choice (merged into its state), or nullopt after
  // `timeout` without one. The returned index is into choices().
  std::optional<std::pair<size_t, RequestOutput>> next(std::chrono::milliseconds timeout);
  bool all_finished() const;
  void abort_unfinished();  // marks them finished with "abort"

  std::vector<ChoiceState>& choices() { return choices_; }
  const std::vector<ChoiceState>& choices() const { return choices_; }

 private:
  void finish(ChoiceState& c, const std::string& reason);
  ServerContext& ctx_;
  std::shared_ptr<AsyncEngine> engine_;
  std::string base_id_;
  std::vector<ChoiceState> choices_;
  size_t rr_ = 0;
};

}  // namespace vireo::server
