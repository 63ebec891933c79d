#include "engine/output_processor.h"

#include <algorithm>

#include "engine/stop_strings.h"
#include "tokenizer/tokenizer.h"

namespace vireo {

RequestOutputState::RequestOutputState(const Tokenizer* tok, const Request& req) : tok_(tok) {
  if (tok_ && req.params.detokenize)
    detok_ = std::make_unique<IncrementalDetokenizer>(*tok_, req.prompt_token_ids, req.params.skip_special_tokens);
}

RequestOutputState::~RequestOutputState() = default;

RequestOutput RequestOutputState::process(const Request& req, const std::vector<int32_t>& new_ids,
                                          std::vector<TokenLogprob> lps) {
  const SamplingParams& p = req.params;
  bool finished = req.is_finished();
  RequestOutput out;
  out.request_id = req.request_id;
  out.token_ids = new_ids;
  out.logprobs = std::move(lps);
  if (first_ && p.prompt_logprobs && !req.prompt_logprobs.empty()) out.prompt_logprobs = req.prompt_logprobs;
  first_ = false;

  if (detok_ && !stop_string_) {
    // A stop token (EOS or stop_token_ids) is not part of the text unless asked.
    size_t n = new_ids.size();
    if (finished && req.finish_reason == FinishReason::kStop && n > 0 && !p.include_stop_str_in_output &&
        !req.stopped_by_grammar)
      --n;
    for (size_t i = 0; i < n; ++i) text_ += detok_->add(new_ids[i]);
    if (finished) text_ += detok_->flush();
    if (!p.stop.empty()) {
      if (auto m = find_stop_string(text_, checked_, p.stop)) {
        const std::string& s = p.stop[m->stop];
        text_.resize(p.include_stop_str_in_output ? m->pos + s.size() : m->pos);
        stop_string_ = s;
        finished = true;
      }
      checked_ = text_.size();
    }
  }

  size_t emit_end = text_.size();
  if (!finished && !p.stop.empty()) emit_end -= std::min(emit_end - emitted_, stop_holdback(text_, p.stop));
  if (emit_end > emitted_) out.text = text_.substr(emitted_, emit_end - emitted_);
  emitted_ = std::max(emitted_, emit_end);

  out.finished = finished;
  if (stop_string_) {
    out.finish_reason = "stop";
    out.stop_string = stop_string_;
  } else if (finished) {
    out.finish_reason = finish_reason_name(req.finish_reason);
    out.stop_token_id = req.stop_token_id;
    out.error = req.error;
    out.error_from_request = req.error_from_request;
  }
  out.num_prompt_tokens = req.num_prompt_tokens();
  out.num_output_tokens = req.num_output_tokens();
  out.num_cached_tokens = std::max(0, req.num_cached_tokens);
  return out;
}

}  // namespace vireo
