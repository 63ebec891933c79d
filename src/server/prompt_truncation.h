// vLLM's truncate_prompt_tokens (completions and chat): keep only the last N prompt tokens (-1: the
// model's context length), so a client can send a long history and let the server cut it. It used
// to be ignored, so such a request was refused as too long (or ran on the whole prompt).
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "server/json_fields.h"

namespace vireo::server {

// The number of tokens to keep, or nullopt when the field is absent / null. 400 (param
// truncate_prompt_tokens) for a non-integer, a value below -1, 0 (nothing would be left), or one over
// max_model_len (vLLM's check).
std::optional<int> parse_truncate_prompt_tokens(const Json& body, int max_model_len);

// Drops the leading tokens beyond `keep` (vLLM truncates on the left); true when it cut any.
bool truncate_prompt(std::vector<int32_t>& ids, std::optional<int> keep);

}  // namespace vireo::server
