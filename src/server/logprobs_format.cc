#include "server/logprobs_format.h"

#include <cmath>

#include "tokenizer/tokenizer.h"

namespace vireo::server {

std::string decode_token(const Tokenizer& tok, int32_t id) {
  int32_t one[1] = {id};
  return tok.decode(std::span<const int32_t>(one, 1), false);
}

std::string logprob_token(const Tokenizer& tok, int32_t id, bool as_id) {
  return as_id ? "token_id:" + std::to_string(id) : decode_token(tok, id);
}

double clamp_logprob(float lp) {
  if (std::isnan(lp)) return -9999.0;
  return std::max(static_cast<double>(lp), -9999.0);
}

size_t utf8_length(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++n;
  return n;
}

CompletionLogprobs::CompletionLogprobs(const Tokenizer& tok, int num_top, size_t initial_text_offset, bool tokens_as_ids)
    : tok_(tok), num_top_(num_top), next_offset_(initial_text_offset), tokens_as_ids_(tokens_as_ids) {}

void CompletionLogprobs::add(int32_t token_id, const TokenLogprob* lp) {
  // vLLM advances text_offset by the token string's length, "token_id:<id>" included.
  std::string token = logprob_token(tok_, token_id, tokens_as_ids_);
  tokens_.push_back(token);
  text_offset_.push_back(next_offset_);
  next_offset_ += utf8_length(token);
  if (!lp) {
    token_logprobs_.push_back(nullptr);
    top_logprobs_.push_back(nullptr);
    return;
  }
  token_logprobs_.push_back(clamp_logprob(lp->logprob));
  // vLLM: the sampled token first, then the top-N (a dict, so repeats collapse).
  Json top = Json::object();
  top[token] = clamp_logprob(lp->logprob);
  int taken = 0;
  for (const auto& [id, value] : lp->top) {
    if (taken >= num_top_) break;
    std::string t = logprob_token(tok_, id, tokens_as_ids_);
    if (!top.contains(t)) top[t] = clamp_logprob(value);
    ++taken;
  }
  top_logprobs_.push_back(std::move(top));
}

Json CompletionLogprobs::take() {
  Json out = {{"text_offset", std::move(text_offset_)},
              {"token_logprobs", std::move(token_logprobs_)},
              {"tokens", std::move(tokens_)},
              {"top_logprobs", std::move(top_logprobs_)}};
  tokens_ = Json::array();
  token_logprobs_ = Json::array();
  top_logprobs_ = Json::array();
  text_offset_ = Json::array();
  return out;
}

namespace {
Json bytes_of(const std::string& s) {
  Json b = Json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}
}  // namespace

Json chat_logprob_entry(const Tokenizer& tok, const TokenLogprob& lp, int num_top, bool tokens_as_ids) {
  std::string token = logprob_token(tok, lp.token_id, tokens_as_ids);
  Json top = Json::array();
  int taken = 0;
  for (const auto& [id, value] : lp.top) {
    if (taken >= num_top) break;
    std::string t = logprob_token(tok, id, tokens_as_ids);
    top.push_back({{"token", t}, {"logprob", clamp_logprob(value)}, {"bytes", bytes_of(t)}});
    ++taken;
  }
  return {{"token", token}, {"logprob", clamp_logprob(lp.logprob)}, {"bytes", bytes_of(token)}, {"top_logprobs", top}};
}

Json prompt_logprobs_json(const Tokenizer& tok, const std::vector<int32_t>& prompt,
                          const std::vector<std::optional<TokenLogprob>>& logprobs, int num_top) {
  Json out = Json::array();
  for (size_t k = 0; k < prompt.size(); ++k) {
    if (k >= logprobs.size() || !logprobs[k]) {
      out.push_back(nullptr);
      continue;
    }
    const TokenLogprob& lp = *logprobs[k];
    auto entry = [&](int32_t id, float logprob, Json rank) {
      return Json{{"logprob", clamp_logprob(logprob)}, {"rank", std::move(rank)}, {"decoded_token", decode_token(tok, id)}};
    };
    Json rank = nullptr;  // vLLM's count of ids at least as likely; unknown (0) only without a backend's count
    if (lp.rank > 0) rank = lp.rank;
    for (size_t i = 0; i < lp.top.size() && rank.is_null(); ++i)
      if (lp.top[i].first == prompt[k]) rank = i + 1;
    // A dict as vLLM builds it: the prompt token's key first; a top entry for the same id replaces
    // its value in place.
    Json dict = Json::object();
    dict[std::to_string(prompt[k])] = entry(prompt[k], lp.logprob, rank);
    for (size_t i = 0; i < lp.top.size() && static_cast<int>(i) < num_top; ++i)
      dict[std::to_string(lp.top[i].first)] = entry(lp.top[i].first, lp.top[i].second, i + 1);
    out.push_back(std::move(dict));
  }
  return out;
}

}  // namespace vireo::server
