// vLLM's human-readable integers for token counts (`--max-model-len 32k`): a lowercase suffix is decimal
// (k 10^3, m 10^6, g 10^9, t 10^12; "25.6k" = 25,600), an uppercase one binary (K 2^10 ... T 2^40, whole
// numbers only).
#pragma once
#include <cstdint>
#include <string>

namespace vireo {

// Throws vireo::Error for text that is none of these, or past INT32_MAX.
int64_t parse_human_int(const std::string& value);

}  // namespace vireo
