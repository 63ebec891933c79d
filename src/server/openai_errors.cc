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

}  // namespace vireo::server
