// Turns a request's new tokens into streamed RequestOutput deltas: incremental detokenization,
// stop strings (cut before the match, text that may still start one held back), finish reasons.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/request.h"
#include "engine/request_output.h"

namespace vireo {

class Tokenizer;
class IncrementalDetokenizer;

class RequestOutputState {
 public:
  // tok may be null (no text is produced).
  RequestOutputState(const Tokenizer* tok, const Request& req);
  ~RequestOutputState();

  // new_ids: the tokens the request got this step; lps: their logprobs (empty if not asked).
  // If req finished, the output is final. If a stop string matched, the returned output is
  // final with finish_reason "stop" and `stopped_by_string()` is true: the caller finishes
  // the request in the scheduler.
  RequestOutput process(const Request& req, const std::vector<int32_t>& new_ids,
                        std::vector<TokenLogprob> lps);
  bool stopped_by_string() const { return stop_string_.has_value(); }
  const std::string& text() const { return text_; }

 private:
  const Tokenizer* tok_;
  std::unique_ptr<IncrementalDetokenizer> detok_;
  std::string text_;       // full output text so far (after any stop-string cut)
  size_t emitted_ = 0;     // bytes of text_ already streamed
  size_t checked_ = 0;     // bytes of text_ already searched for stop strings
  std::optional<std::string> stop_string_;
  bool first_ = true;
};

}  // namespace vireo
