// OpenAI's error envelope {"error": {"message", "type", "param", "code"}} and the exception
// every request-handling path throws to produce one. Types follow vLLM / the OpenAI SDK names
// (BadRequestError, NotFoundError, ...); "code" is the HTTP status, as vLLM sends it.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace vireo::server {

struct ApiError : std::runtime_error {
  int status;
  std::string type;
  std::optional<std::string> param;
  std::string message;  // whole, where what() stops at a NUL (a model name sent as "a\u0000b")
  ApiError(int status, std::string type, const std::string& message, std::optional<std::string> param = std::nullopt)
      : std::runtime_error(message), status(status), type(std::move(type)), param(std::move(param)), message(message) {}
};

// The type name for a status: 400 BadRequestError, 401 AuthenticationError, 404 NotFoundError, ...
std::string error_type_for_status(int status);

ApiError bad_request(const std::string& message, std::optional<std::string> param = std::nullopt);
ApiError not_found(const std::string& message);

nlohmann::ordered_json error_json(int status, const std::string& type, const std::string& message,
                          const std::optional<std::string>& param = std::nullopt);
nlohmann::ordered_json error_json(const ApiError& e);

// Anthropic's envelope for the Messages API (/v1/messages...): {"type": "error", "error": {"type", "message"}},
// the type named by the status as Anthropic names it (400 invalid_request_error, 401 authentication_error,
// 404 not_found_error, 413 request_too_large, 429 rate_limit_error, 503 overloaded_error, 5xx api_error).
std::string anthropic_error_type(int status);
nlohmann::ordered_json anthropic_error_json(const ApiError& e);
bool is_anthropic_path(std::string_view path);  // /v1/messages and below
// The envelope the path's API uses.
nlohmann::ordered_json error_json_for(std::string_view path, const ApiError& e);

}  // namespace vireo::server
