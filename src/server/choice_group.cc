#include "server/choice_group.h"

#include "core/error.h"
#include "server/openai_errors.h"

namespace vireo::server {

ChoiceGroup::~ChoiceGroup() { abort_unfinished(); }

void ChoiceGroup::add_prompt(int prompt_index, const std::vector<int32_t>& prompt_ids, const SamplingParams& params) {
  int n = params.n;
  for (int i = 0; i < n; ++i) {
    SamplingParams p = params;
    p.n = 1;
    if (p.seed && n > 1) p.seed = *p.seed + static_cast<uint64_t>(i);
    ChoiceState c;
    c.index = prompt_index * n + i;
    c.prompt_index = prompt_index;
    c.request_id = base_id_ + "-" + std::to_string(c.index);
    c.num_prompt_tokens = static_cast<int>(prompt_ids.size());
    ctx_.register_request(c.request_id);
    try {
      c.stream = engine_->add_request(c.request_id, prompt_ids, p);
    } catch (const Error& e) {
      ctx_.unregister_request(c.request_id);
      abort_unfinished();
      throw bad_request(e.what());
    } catch (...) {
      ctx_.unregister_request(c.request_id);
      abort_unfinished();
      throw;
    }
    if (!c.stream) {
      ctx_.unregister_request(c.request_id);
      abort_unfinished();
      throw ApiError(500, "InternalServerError", "the engine returned no stream");
    }
    choices_.push_back(std::move(c));
  }
}

void ChoiceGroup::finish(ChoiceState& c, const std::string& reason) {
  if (c.finished) return;
  c.finished = true;
  c.finish_reason = reason;
  ctx_.count_finish(reason);
  ctx_.unregister_request(c.request_id);
}

void ChoiceGroup::abort_unfinished() {
  for (auto& c : choices_) {
    if (c.finished) continue;
    engine_->abort(c.request_id);
    finish(c, "abort");
  }
}

bool ChoiceGroup::all_finished() const {
  for (const auto& c : choices_)
    if (!c.finished) return false;
  return true;
}

std::optional<std::pair<size_t, RequestOutput>> ChoiceGroup::next(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto merge = [&](size_t i, RequestOutput out) -> std::pair<size_t, RequestOutput> {
    ChoiceState& c = choices_[i];
    c.text += out.text;
    c.token_ids.insert(c.token_ids.end(), out.token_ids.begin(), out.token_ids.end());
    c.logprobs.insert(c.logprobs.end(), out.logprobs.begin(), out.logprobs.end());
    if (!out.prompt_logprobs.empty()) c.prompt_logprobs = out.prompt_logprobs;
    if (out.num_prompt_tokens > 0) c.num_prompt_tokens = out.num_prompt_tokens;
    c.num_output_tokens = std::max(c.num_output_tokens, out.num_output_tokens);
    c.num_cached_tokens = std::max(c.num_cached_tokens, out.num_cached_tokens);
    if (c.num_output_tokens < static_cast<int>(c.token_ids.size())) c.num_output_tokens = static_cast<int>(c.token_ids.size());
    if (out.finished) {
      c.stop_string = out.stop_string;
      c.stop_token_id = out.stop_token_id;
      c.error = out.error;
      c.error_from_request = out.error_from_request;
      finish(c, out.finish_reason.empty() ? "stop" : out.finish_reason);
    }
    return {i, std::move(out)};
  };
  for (;;) {
    std::vector<size_t> open;
    for (size_t k = 0; k < choices_.size(); ++k) {
      size_t i = (rr_ + k) % choices_.size();
      if (!choices_[i].finished) open.push_back(i);
    }
    if (open.empty()) return std::nullopt;
    auto now = std::chrono::steady_clock::now();
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    if (open.size() == 1) {
      auto out = choices_[open[0]].stream->next(std::max(left, std::chrono::milliseconds(0)));
      if (!out) return std::nullopt;
      return merge(open[0], std::move(*out));
    }
    // Several streams: take whatever is ready, round robin, so no choice starves.
    for (size_t i : open) {
      if (auto out = choices_[i].stream->next(std::chrono::milliseconds(0))) {
        rr_ = i + 1;
        return merge(i, std::move(*out));
      }
    }
    if (left <= std::chrono::milliseconds(0)) return std::nullopt;
    size_t i = open[0];
    rr_ = i + 1;
    if (auto out = choices_[i].stream->next(std::min(left, std::chrono::milliseconds(2))))
      return merge(i, std::move(*out));
  }
}

}  // namespace vireo::server
