#include "server/openai_errors.h"

namespace vireo::server {

std::string error_type_for_status(int status) {
  switch (status) {
    case 400: return "BadRequestError";
    case 401: return "AuthenticationError";
    case 403: return "PermissionDeniedError";
    case 404: return "NotFoundError";
    case 405: return "MethodNotAllowedError";
    case 408: return "RequestTimeoutError";
    case 413: return "RequestTooLargeError";
    case 414: return "URITooLongError";
    case 415: return "UnsupportedMediaTypeError";
    case 422: return "UnprocessableEntityError";
    case 429: return "RateLimitError";
    case 503: return "ServiceUnavailableError";
    default: return status >= 500 ? "InternalServerError" : "BadRequestError";
  }
}

ApiError bad_request(const std::string& message, std::optional<std::string> param) {
  return ApiError(400, "BadRequestError", message, std::move(param));
}

ApiError not_found(const std::string& message) { return ApiError(404, "NotFoundError", message); }

nlohmann::ordered_json error_json(int status, const std::string& type, const std::string& message,
                          const std::optional<std::string>& param) {
  nlohmann::ordered_json err = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", status}};
  if (param) err["param"] = *param;
  return {{"error", err}};
}

nlohmann::ordered_json error_json(const ApiError& e) { return error_json(e.status, e.type, e.message, e.param); }

std::string anthropic_error_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: return "overloaded_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

nlohmann::ordered_json anthropic_error_json(const ApiError& e) {
  return {{"type", "error"}, {"error", {{"type", anthropic_error_type(e.status)}, {"message", e.message}}}};
}

bool is_anthropic_path(std::string_view path) {
  constexpr std::string_view kPrefix = "/v1/messages";
  return path.substr(0, kPrefix.size()) == kPrefix && (path.size() == kPrefix.size() || path[kPrefix.size()] == '/');
}

nlohmann::ordered_json error_json_for(std::string_view path, const ApiError& e) {
  return is_anthropic_path(path) ? anthropic_error_json(e) : error_json(e);
}

}  // namespace vireo::server
