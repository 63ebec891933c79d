// Engine logprobs -> the two OpenAI shapes:
//  completions: {"tokens", "token_logprobs", "top_logprobs": [{token: logprob}], "text_offset"}
//  chat:        {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}]}
// Token strings are the single-token decodes (vLLM's decoded_token), or "token_id:<id>" under vLLM's
// return_tokens_as_token_ids (RL clients map logprobs back to ids; a decode can be ambiguous, e.g. a
// lone byte of a multi-byte character); -inf is clamped to -9999.0.
#pragma once
#include <optional>
#include <vector>

#include "engine/request_output.h"
#include "server/json_fields.h"

namespace vireo {
class Tokenizer;
}

namespace vireo::server {

// Completions format, built incrementally so streamed chunks carry continuing text offsets.
class CompletionLogprobs {
 public:
  CompletionLogprobs(const Tokenizer& tok, int num_top, size_t initial_text_offset = 0, bool tokens_as_ids = false);
  // `lp` null: an entry with null logprobs (the first prompt token under echo).
  void add(int32_t token_id, const TokenLogprob* lp);
  bool empty() const { return tokens_.empty(); }
  // The entries added since the previous take().
  Json take();

 private:
  const Tokenizer& tok_;
  int num_top_;
  size_t next_offset_;
  bool tokens_as_ids_;
  Json tokens_ = Json::array(), token_logprobs_ = Json::array(), top_logprobs_ = Json::array(),
       text_offset_ = Json::array();
};

// Chat format: one entry of logprobs.content.
Json chat_logprob_entry(const Tokenizer& tok, const TokenLogprob& lp, int num_top, bool tokens_as_ids = false);

// vLLM's prompt_logprobs (completions choices, chat responses): one entry per prompt token, null for
// the first, else {"<token id>": {"logprob", "rank", "decoded_token"}} with the prompt token first,
// then the top `num_top`. The engine returns only the top N, so the prompt token's rank is null
// when it is not among them (vLLM's Logprob.rank is optional; vLLM itself counts the whole vocabulary).
Json prompt_logprobs_json(const Tokenizer& tok, const std::vector<int32_t>& prompt,
                          const std::vector<std::optional<TokenLogprob>>& logprobs, int num_top);

std::string decode_token(const Tokenizer& tok, int32_t id);
// A logprob entry's token string: decode_token, or "token_id:<id>" (return_tokens_as_token_ids).
std::string logprob_token(const Tokenizer& tok, int32_t id, bool as_id);
double clamp_logprob(float lp);
size_t utf8_length(const std::string& s);  // code points, as Python's len()

}  // namespace vireo::server
