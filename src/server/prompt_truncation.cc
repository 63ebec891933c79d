#include "server/prompt_truncation.h"

#include <fmt/format.h>

#include "server/openai_errors.h"

namespace vireo::server {

std::optional<int> parse_truncate_prompt_tokens(const Json& body, int max_model_len) {
  auto n = get_int(body, "truncate_prompt_tokens");
  if (!n) return std::nullopt;
  if (*n == -1) return max_model_len;
  if (*n < 1)
    throw bad_request(fmt::format("truncate_prompt_tokens must be -1 (the context length) or at least 1, got {}", *n),
                      "truncate_prompt_tokens");
  if (*n > max_model_len)
    throw bad_request(fmt::format("truncate_prompt_tokens value ({}) is greater than max_model_len ({}). Please request a "
                                  "smaller truncation size.",
                                  *n, max_model_len),
                      "truncate_prompt_tokens");
  return static_cast<int>(*n);
}

bool truncate_prompt(std::vector<int32_t>& ids, std::optional<int> keep) {
  if (!keep || ids.size() <= static_cast<size_t>(*keep)) return false;
  ids.erase(ids.begin(), ids.end() - *keep);
  return true;
}

}  // namespace vireo::server
