// The pre-tokenizer of DeepSeek-LLM (7B / 67B) and DeepSeek-V2 / V2-Lite, GGUF pre "deepseek-llm".
#pragma once
#include <nlohmann/json.hpp>

namespace vireo {

// Their tokenizer.json "pre_tokenizer": a Sequence of five Isolated Splits (line breaks, letter runs, ASCII /
// full-width punctuation runs, trailing whitespace, CJK / Hangul runs), Digits(individual_digits) and
// ByteLevel without its regex.
nlohmann::json deepseek_llm_pre_tokenizer();

// The CJK / Hangul Split regex of that Sequence, shared with DeepSeek-Coder's ("deepseek-coder").
extern const char* const kDeepseekCjkRegex;

}  // namespace vireo
