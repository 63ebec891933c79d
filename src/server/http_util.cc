#include "server/http_util.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "server/request_framing.h"

namespace vireo::server {

void send_json(httplib::Response& res, int status, const Json& body) {
  res.status = status;
  res.set_content(dump_json(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) { send_json(res, e.status, error_json(e)); }

void send_error(httplib::Response& res, int status, const std::string& message) {
  send_json(res, status, error_json(status, error_type_for_status(status), message));
}

void send_error(const httplib::Request& req, httplib::Response& res, const ApiError& e) {
  send_json(res, e.status, error_json_for(req.path, e));
}


Json parse_json_body(const httplib::Request& req) {
  if (!is_json_media_type(req.get_header_value("Content-Type")))
    throw ApiError(415, "UnsupportedMediaTypeError", "Unsupported Media Type: Only 'application/json' is allowed");
  Json body;
  try {
    body = Json::parse(req.body);
  } catch (const Json::exception& e) {  // parse_error, and out_of_range for 1e999
    throw bad_request(std::string("Invalid JSON body (malformed or not UTF-8): ") + e.what());
  }
  if (!body.is_object()) throw bad_request("The request body must be a JSON object");
  // Request handling copies and converts parts of the body recursively (chat template values, tool
  // schemas); a body nested tens of thousands deep would overflow a thread's stack.
  if (json_depth(body, kMaxJsonDepth) > kMaxJsonDepth)
    throw bad_request("The request body is nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  return body;
}

Json usage_json(int64_t prompt_tokens, int64_t completion_tokens, std::optional<int64_t> cached_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"total_tokens", prompt_tokens + completion_tokens},
          {"completion_tokens", completion_tokens},
          {"prompt_tokens_details", cached_tokens ? Json{{"cached_tokens", *cached_tokens}} : Json(nullptr)}};
}

}  // namespace vireo::server
