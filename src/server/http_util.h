// Small helpers between cpp-httplib and the OpenAI JSON shapes.
#pragma once
#include <optional>
#include <httplib.h>

#include <ctime>

#include "server/json_fields.h"
#include "server/openai_errors.h"

namespace vireo::server {

void send_json(httplib::Response& res, int status, const Json& body);
void send_error(httplib::Response& res, const ApiError& e);
void send_error(httplib::Response& res, int status, const std::string& message);
// In the envelope of the request path's API (error_json_for: Anthropic's for /v1/messages).
void send_error(const httplib::Request& req, httplib::Response& res, const ApiError& e);

// Checks Content-Type is application/json (415 otherwise, as vLLM) and parses the body
// (400 on malformed JSON or invalid UTF-8; the body must be an object).
Json parse_json_body(const httplib::Request& req);

inline int64_t unix_now() { return static_cast<int64_t>(std::time(nullptr)); }

// prompt_tokens_details is null (vLLM's default) unless cached_tokens is given (--enable-prompt-tokens-details).
Json usage_json(int64_t prompt_tokens, int64_t completion_tokens, std::optional<int64_t> cached_tokens = std::nullopt);
// usage_json's cached_tokens: `cached` when the request reports prompt_tokens_details, else none.
inline std::optional<int64_t> reported_cached(bool tokens_details, int64_t cached) {
  return tokens_details ? std::optional<int64_t>(cached) : std::nullopt;
}

}  // namespace vireo::server
