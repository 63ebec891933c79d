#include "server/sampling_validation.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>

#include "server/bad_words.h"
#include "server/openai_errors.h"
#include "server/structured_output_params.h"

namespace vireo::server {
namespace {

// The engine samples in 32-bit floats. A value must stay finite after the cast (temperature 1e39
// would become inf), and a positive value where 0 is invalid (top_p, repetition_penalty) must stay
// positive: vLLM validates in Python doubles, so 1e-300 > 0 is accepted there; it is kept here as the
// smallest normal float (a subnormal would be flushed to zero on the GPU, and 1e-300 underflows to 0).
float to_float(double v, const char* param, bool keep_positive = false) {
  const float f = static_cast<float>(v);
  if (!std::isfinite(f))
    throw bad_request(fmt::format("{} is out of range: {} does not fit a 32-bit float", param, v), param);
  if (keep_positive && v > 0.0 && f < std::numeric_limits<float>::min()) return std::numeric_limits<float>::min();
  return f;
}

// A request's list of token ids as int32, each inside the vocabulary (else a 400 naming `param`).
std::vector<int32_t> vocab_ids(const std::vector<int64_t>& ids, int64_t vocab_size, const char* param) {
  std::vector<int32_t> out;
  out.reserve(ids.size());
  for (int64_t id : ids) {
    if (id < 0 || id >= vocab_size)
      throw bad_request(fmt::format("{}: token id {} is out of vocabulary (size {})", param, id, vocab_size), param);
    out.push_back(static_cast<int32_t>(id));
  }
  return out;
}

// A logit_bias key as vLLM reads it, with Python's int(): surrounding whitespace, a sign, and single
// underscores between digits are allowed (" 7", "+7", "0007", "1_000"). Values past int64 saturate
// (outside any vocabulary); nullopt when the key is not an integer.
std::optional<int64_t> python_int(const std::string& key) {
  const char* ws = " \t\n\r\f\v";
  const size_t b = key.find_first_not_of(ws);
  if (b == std::string::npos) return std::nullopt;
  const std::string t = key.substr(b, key.find_last_not_of(ws) - b + 1);
  size_t i = 0;
  bool negative = false;
  if (t[0] == '+' || t[0] == '-') negative = t[i++] == '-';
  if (i == t.size()) return std::nullopt;
  int64_t v = 0;
  for (bool digit_before = false; i < t.size(); ++i) {
    const char c = t[i];
    if (c == '_' && digit_before && i + 1 < t.size() && t[i + 1] >= '0' && t[i + 1] <= '9') {
      digit_before = false;
      continue;
    }
    if (c < '0' || c > '9') return std::nullopt;
    digit_before = true;
    v = v > (std::numeric_limits<int64_t>::max() - 9) / 10 ? std::numeric_limits<int64_t>::max() : v * 10 + (c - '0');
  }
  return negative ? -v : v;
}

}  // namespace

SamplingParams parse_sampling_params(const Json& body, const ModelInfo& model, const ValidationLimits& limits) {
  SamplingParams p;
  if (model.temperature) p.temperature = *model.temperature;
  if (model.top_p) p.top_p = *model.top_p;
  if (model.top_k) p.top_k = *model.top_k;
  if (model.min_p) p.min_p = *model.min_p;
  if (model.repetition_penalty) p.repetition_penalty = *model.repetition_penalty;

  if (auto n = get_int(body, "n")) {
    if (*n < 1) throw bad_request("n must be at least 1, got " + std::to_string(*n), "n");
    if (*n > limits.max_n)
      throw bad_request(fmt::format("n must be at most {}, got {}", limits.max_n, *n), "n");
    p.n = static_cast<int>(*n);
  }
  if (auto best_of = get_int(body, "best_of")) {
    // Choosing the best of more sequences than n is not supported (vLLM V1 refuses it too); best_of <= n
    // asks for nothing more and is ignored as V1 does (LangChain may send best_of 1 with n 2).
    if (*best_of < 1) throw bad_request(fmt::format("best_of must be at least 1, got {}", *best_of), "best_of");
    if (*best_of > p.n)
      throw bad_request(fmt::format("best_of > n is not supported (best_of {}, n {})", *best_of, p.n), "best_of");
  }
  if (auto t = get_number(body, "temperature")) {
    if (*t < 0.0) throw bad_request(fmt::format("temperature must be non-negative, got {}", *t), "temperature");
    p.temperature = to_float(*t, "temperature");
  }
  if (auto v = get_number(body, "top_p")) {
    if (!(*v > 0.0 && *v <= 1.0)) throw bad_request(fmt::format("top_p must be in (0, 1], got {}", *v), "top_p");
    p.top_p = to_float(*v, "top_p", true);
  }
  if (auto v = get_int(body, "top_k")) {
    if (*v < -1) throw bad_request(fmt::format("top_k must be -1 (disable), 0 (disable) or at least 1, got {}", *v), "top_k");
    if (*v > (1 << 30)) throw bad_request(fmt::format("top_k is too large: {}", *v), "top_k");
    p.top_k = static_cast<int>(*v);
  }
  if (auto v = get_number(body, "min_p")) {
    if (!(*v >= 0.0 && *v <= 1.0)) throw bad_request(fmt::format("min_p must be in [0, 1], got {}", *v), "min_p");
    p.min_p = to_float(*v, "min_p");
  }
  if (auto v = get_number(body, "presence_penalty")) {
    if (!(*v >= -2.0 && *v <= 2.0))
      throw bad_request(fmt::format("presence_penalty must be in [-2, 2], got {}", *v), "presence_penalty");
    p.presence_penalty = to_float(*v, "presence_penalty");
  }
  if (auto v = get_number(body, "frequency_penalty")) {
    if (!(*v >= -2.0 && *v <= 2.0))
      throw bad_request(fmt::format("frequency_penalty must be in [-2, 2], got {}", *v), "frequency_penalty");
    p.frequency_penalty = to_float(*v, "frequency_penalty");
  }
  if (auto v = get_number(body, "repetition_penalty")) {
    if (!(*v > 0.0) || *v > 1e6)
      throw bad_request(fmt::format("repetition_penalty must be in (0, 1e6], got {}", *v), "repetition_penalty");
    p.repetition_penalty = to_float(*v, "repetition_penalty", true);
  }
  // Any 64-bit seed, as torch.Generator.manual_seed takes in vLLM: [-2^63, 2^64 - 1], negatives as their
  // two's complement.
  if (const auto it = body.find("seed"); it != body.end() && it->is_number_unsigned()) p.seed = it->get<uint64_t>();
  else if (auto v = get_int(body, "seed")) p.seed = static_cast<uint64_t>(*v);

  if (auto stops = get_string_or_list(body, "stop")) {
    if (static_cast<int>(stops->size()) > limits.max_stop_strings)
      throw bad_request(fmt::format("at most {} stop strings are allowed, got {}", limits.max_stop_strings, stops->size()), "stop");
    for (auto& s : *stops) {
      if (s.size() > limits.max_stop_string_bytes)
        throw bad_request(fmt::format("stop strings must be at most {} bytes, got one of {}", limits.max_stop_string_bytes, s.size()), "stop");
      if (!s.empty()) p.stop.push_back(s);  // "" can never match; vLLM ignores it too
    }
  }
  if (auto it = body.find("logit_bias"); it != body.end() && !it->is_null()) {
    // OpenAI / vLLM: {"<token id>": bias}; vLLM clamps the bias to [-100, 100].
    if (!it->is_object()) throw bad_request("'logit_bias' must be an object mapping token ids to numbers", "logit_bias");
    if (static_cast<int64_t>(it->size()) > limits.max_logit_bias)
      throw bad_request(fmt::format("at most {} logit_bias entries are allowed", limits.max_logit_bias), "logit_bias");
    std::map<int32_t, float> bias;  // "7" and "007" name one id: the last one given wins
    for (const auto& [key, value] : it->items()) {
      const std::optional<int64_t> id = python_int(key);
      if (!id || *id < 0 || *id >= model.vocab_size)
        throw bad_request(fmt::format("logit_bias: '{}' is not a token id of the vocabulary (size {})", key, model.vocab_size), "logit_bias");
      if (!value.is_number()) throw bad_request(fmt::format("logit_bias['{}'] must be a number", key), "logit_bias");
      const double b = value.get<double>();
      if (!std::isfinite(b)) throw bad_request(fmt::format("logit_bias['{}'] must be finite", key), "logit_bias");
      bias[static_cast<int32_t>(*id)] = to_float(std::clamp(b, -100.0, 100.0), "logit_bias");
    }
    p.logit_bias.assign(bias.begin(), bias.end());
  }
  p.bad_words = parse_bad_words(body);  // tokenized by the endpoint (tokenize_bad_words)
  if (auto it = body.find("allowed_token_ids"); it != body.end() && !it->is_null()) {
    auto ids = get_int_list(body, "allowed_token_ids");
    if (!ids || ids->empty()) throw bad_request("allowed_token_ids must be a non-empty list of token ids", "allowed_token_ids");
    if (static_cast<int64_t>(ids->size()) > model.vocab_size)
      throw bad_request(fmt::format("allowed_token_ids has more entries than the vocabulary ({})", model.vocab_size), "allowed_token_ids");
    p.allowed_token_ids = vocab_ids(*ids, model.vocab_size, "allowed_token_ids");
    std::sort(p.allowed_token_ids.begin(), p.allowed_token_ids.end());
    p.allowed_token_ids.erase(std::unique(p.allowed_token_ids.begin(), p.allowed_token_ids.end()), p.allowed_token_ids.end());
  }
  if (auto ids = get_int_list(body, "stop_token_ids")) {
    if (static_cast<int>(ids->size()) > limits.max_stop_token_ids)
      throw bad_request(fmt::format("at most {} stop_token_ids are allowed", limits.max_stop_token_ids), "stop_token_ids");
    p.stop_token_ids = vocab_ids(*ids, model.vocab_size, "stop_token_ids");
  }
  if (auto v = get_bool(body, "ignore_eos")) p.ignore_eos = *v;
  if (auto v = get_bool(body, "include_stop_str_in_output")) p.include_stop_str_in_output = *v;
  if (auto v = get_bool(body, "skip_special_tokens")) p.skip_special_tokens = *v;
  get_bool(body, "spaces_between_special_tokens");  // accepted for compatibility; type-checked only
  if (auto v = get_int(body, "min_tokens")) {
    if (*v < 0) throw bad_request(fmt::format("min_tokens must be non-negative, got {}", *v), "min_tokens");
    if (*v > (1 << 30)) throw bad_request(fmt::format("min_tokens is too large: {}", *v), "min_tokens");
    p.min_tokens = static_cast<int>(*v);
  }
  if (auto v = get_int(body, "priority")) {
    // vLLM's check and message (clients match it to retry without the field); 0 is always accepted.
    if (*v != 0 && !model.priority_scheduling)
      throw bad_request(fmt::format("Got priority {} but Priority scheduling is not enabled.", *v), "priority");
    p.priority = *v;
  }
  if (auto salt = get_string(body, "cache_salt")) {  // vLLM: prefix-cache isolation between tenants
    if (salt->empty()) throw bad_request("Parameter 'cache_salt' must be a non-empty string if provided.", "cache_salt");
    p.cache_salt = *salt;
  }
  get_string(body, "user");  // accepted, type-checked, unused
  p.grammar = parse_structured_outputs(body);
  return p;
}

StreamFlags parse_stream_flags(const Json& body) {
  StreamFlags f;
  if (auto v = get_bool(body, "stream")) f.stream = *v;
  auto it = body.find("stream_options");
  if (it != body.end() && !it->is_null()) {
    if (!it->is_object()) throw bad_request("'stream_options' must be an object", "stream_options");
    // vLLM refuses them without stream only when non-empty ({} is falsy there).
    if (!f.stream && !it->empty())
      throw bad_request("Stream options can only be defined when `stream=True`.", "stream_options");
    if (auto v = get_bool(*it, "include_usage")) f.include_usage = *v;
    if (auto v = get_bool(*it, "continuous_usage_stats")) f.continuous_usage = *v;
  }
  return f;
}

std::optional<int> parse_prompt_logprobs(const Json& body, bool stream, const ValidationLimits& limits) {
  auto n = get_int(body, "prompt_logprobs");
  if (!n) return std::nullopt;
  if (stream && *n != 0)
    throw bad_request("`prompt_logprobs` are not available when `stream=True`.", "prompt_logprobs");
  if (*n < -1) throw bad_request(fmt::format("`prompt_logprobs` must be a positive value or -1, got {}", *n), "prompt_logprobs");
  if (*n == -1 || *n > limits.max_logprobs)
    throw bad_request(fmt::format("Requested prompt logprobs of {}, which is greater than max allowed: {}",
                                  *n == -1 ? "-1 (the whole vocabulary)" : std::to_string(*n), limits.max_logprobs),
                      "prompt_logprobs");
  return static_cast<int>(*n);
}

void reject_unsupported(const Json& body) {
  auto present = [&](const char* key) {
    auto it = body.find(key);
    return it != body.end() && !it->is_null();
  };
  if (present("suffix")) {
    const Json& s = body["suffix"];
    if (!s.is_string()) throw bad_request("'suffix' must be a string", "suffix");
    if (!s.get<std::string>().empty()) throw bad_request("suffix is not supported", "suffix");
  }
  // vLLM request fields that change what is generated. Accepting and dropping them would return
  // output that silently breaks the request's constraint (sampling instead of beam search, a
  // processor not run), so each is a 400 unless it asks for nothing.
  if (auto v = body.find("use_beam_search"); v != body.end() && !v->is_null()) {
    if (!v->is_boolean()) throw bad_request("'use_beam_search' must be a boolean", "use_beam_search");
    if (v->get<bool>()) throw bad_request("use_beam_search (beam search) is not supported", "use_beam_search");
  }
  if (auto v = body.find("logits_processors"); v != body.end() && !v->is_null() && !(v->is_array() && v->empty()))
    throw bad_request("logits_processors is not supported", "logits_processors");
}

}  // namespace vireo::server
