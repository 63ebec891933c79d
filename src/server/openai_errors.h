// OpenAI's error envelope {"error": {"message", "type", "param", "code"}} and the exception
// every request-handling path throws to produce one. Types follow vLLM / the OpenAI SDK names
// (BadRequestError, NotFoundError, ...); "code" is the HTTP status, as vLLM sends it.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>

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

}  // namespace vireo::server
