// The pre-tokenizer of DeepSeek-Coder (1.3B / 6.7B / 33B, base and instruct), GGUF pre "deepseek-coder".
#pragma once
#include <nlohmann/json.hpp>

namespace vireo {

// Their tokenizer.json "pre_tokenizer": a Sequence of four Isolated Splits (line breaks, letter runs,
// punctuation runs, CJK / Hangul runs), Digits(individual_digits) and ByteLevel without its regex.
nlohmann::json deepseek_coder_pre_tokenizer();

}  // namespace vireo
