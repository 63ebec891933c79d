// Per-request generation settings, with vLLM's names and defaults.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "structured/grammar.h"

namespace vireo {

struct SamplingParams {
  int n = 1;                       // handled by the server (n requests); the engine sees 1
  float temperature = 1.0f;        // 0 = greedy
  float top_p = 1.0f;              // (0, 1]
  int top_k = 0;                   // 0 or -1 = off
  float min_p = 0.0f;              // [0, 1]
  float repetition_penalty = 1.0f; // > 0; 1 = off (HF/vLLM semantics over prompt + output)
  float presence_penalty = 0.0f;   // [-2, 2], over output tokens
  float frequency_penalty = 0.0f;  // [-2, 2], over output tokens
  std::optional<uint64_t> seed;    // same seed, same output
  int max_tokens = 16;
  int min_tokens = 0;              // EOS/stop tokens are masked until this many are generated
  std::vector<std::string> stop;   // stop strings: output is truncated before the match
  std::vector<int32_t> stop_token_ids;
  // OpenAI logit_bias: (token id, bias) added to the logits before sampling (and before the reported
  // logprobs, which vLLM takes from the raw logits); ids distinct, bias clamped to [-100, 100].
  std::vector<std::pair<int32_t, float>> logit_bias;
  // vLLM's allowed_token_ids: only these ids may be sampled (a token bitmask row, ANDed with a
  // grammar's); sorted, distinct; empty = every token.
  std::vector<int32_t> allowed_token_ids;
  // vLLM's bad_words: the strings as sent (the server tokenizes them into bad_words_token_ids). A word's
  // last token is banned wherever the output so far ends with the rest of it (a one-token word: always).
  std::vector<std::string> bad_words;
  std::vector<std::vector<int32_t>> bad_words_token_ids;
  bool include_stop_str_in_output = false;
  bool ignore_eos = false;
  std::optional<int> logprobs;         // top-N logprobs per generated token (0 = chosen only)
  std::optional<int> prompt_logprobs;  // top-N logprobs per prompt token (echo)
  bool skip_special_tokens = true;
  bool detokenize = true;
  // Structured outputs (guided decoding): the grammar every output token must follow, compiled once
  // by the server (structured/structured_output.h) and shared by the request's n choices; null = free text.
  std::shared_ptr<const structured::Grammar> grammar;
  // With a reasoning parser (vLLM's reasoning-gated structured outputs): the grammar applies only
  // after this token (the end of reasoning, "</think>"), from the start if the prompt holds it.
  std::optional<int32_t> grammar_start_token;
  // vLLM's request priority (--scheduling-policy priority): lower is served first, ties by arrival.
  // Not a sampling setting (vLLM passes it beside the params), but it rides here so every path that
  // adds a request (server, LLM, bench) carries it without another argument. Non-zero needs the
  // priority policy (AsyncEngine::add_request refuses it otherwise, as vLLM does).
  int64_t priority = 0;
  // The LoRA adapter the request runs with (AsyncEngine::lora_id of the model name it asked for; 0: the
  // base model). Like priority, a request setting rather than a sampling one.
  int32_t lora_id = 0;
  // vLLM's cache_salt: prefix-cache blocks are shared only between requests with the same salt (and the
  // same adapter), so one tenant cannot time another's cached prompts.
  std::string cache_salt;
};

}  // namespace vireo
