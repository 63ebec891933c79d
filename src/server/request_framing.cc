#include "server/request_framing.h"

#include <fmt/format.h>
#include <poll.h>
#include <strings.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <memory>

#include "server/connection_probe.h"
#include "server/http_util.h"

namespace vireo::server {
namespace {

std::string trimmed(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

std::string lowercase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// The declared body length: nullopt without the header, -1 when it is not a decimal number (or
// several headers disagree); lengths past 19 digits saturate (they are over any limit anyway).
std::optional<int64_t> content_length(const httplib::Request& req) {
  std::optional<int64_t> out;
  auto [begin, end] = req.headers.equal_range("Content-Length");
  for (auto it = begin; it != end; ++it) {
    std::string v = trimmed(it->second);
    if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos) return -1;
    v.erase(0, std::min(v.find_first_not_of('0'), v.size() - 1));  // "007" is 7
    int64_t n = v.size() > 18 ? INT64_MAX : std::stoll(v);
    if (out && *out != n) return -1;
    out = n;
  }
  return out;
}

// Closing a socket with unread bytes sends a reset, which can destroy the response before the
// client reads it (Python's http.client, still uploading the body, only sees a broken pipe). So,
// as Apache's lingering close: end our side (FIN after the response), then read and drop what the
// client still sends, until it closes or for at most kLingerMs.
constexpr int kLingerMs = 2000;

void linger(int fd) {
  if (fd < 0) return;
  shutdown(fd, SHUT_WR);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kLingerMs);
  char buf[65536];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) return;
    if (recv(fd, buf, sizeof buf, MSG_DONTWAIT) <= 0) return;  // EOF, reset or error
  }
}

}  // namespace

std::optional<ApiError> check_body_framing(const httplib::Request& req, size_t max_body_bytes) {
  auto length = content_length(req);
  if (length && *length < 0) {
    std::string values;
    auto [begin, end] = req.headers.equal_range("Content-Length");
    for (auto it = begin; it != end; ++it) values += (values.empty() ? "'" : ", '") + it->second + "'";
    return bad_request("Invalid Content-Length " + values + ": it must be one non-negative decimal number");
  }
  if (req.has_header("Transfer-Encoding")) {
    std::string te = req.get_header_value("Transfer-Encoding");
    if (strcasecmp(trimmed(te).c_str(), "chunked") != 0)
      return bad_request("Unsupported Transfer-Encoding '" + te + "' (only chunked is supported)");
    if (length) return bad_request("A request must not have both Content-Length and Transfer-Encoding");
  }
  if (length && static_cast<uint64_t>(*length) > max_body_bytes)
    return ApiError(413, "RequestTooLargeError",
                    fmt::format("Request body too large: Content-Length {} is over the limit of {} bytes",
                                req.get_header_value("Content-Length"), max_body_bytes));
  return std::nullopt;
}

std::optional<ApiError> check_json_body_headers(const httplib::Request& req) {
  std::string encoding = lowercase(trimmed(req.get_header_value("Content-Encoding")));
  if (!encoding.empty() && encoding != "identity")
    return ApiError(415, "UnsupportedMediaTypeError",
                    "Unsupported Content-Encoding '" + req.get_header_value("Content-Encoding") +
                        "': request bodies must be sent uncompressed");
  if (!is_json_media_type(req.get_header_value("Content-Type")))
    return ApiError(415, "UnsupportedMediaTypeError", "Unsupported Media Type: Only 'application/json' is allowed");
  if (!req.has_header("Content-Length") && !req.has_header("Transfer-Encoding"))
    return bad_request("The request has no body (no Content-Length, not chunked): a JSON object is required");
  return std::nullopt;
}

bool declares_body(const httplib::Request& req) {
  if (req.has_header("Transfer-Encoding")) return true;
  auto length = content_length(req);
  return length && *length != 0;  // -1 (unparsable) may hide a body too
}

bool is_json_media_type(const std::string& content_type) {
  std::string media = content_type.substr(0, content_type.find(';'));
  media.erase(std::remove_if(media.begin(), media.end(), [](unsigned char c) { return std::isspace(c); }), media.end());
  return lowercase(media) == "application/json";
}

void send_error_and_close(const httplib::Request& req, httplib::Response& res, const ApiError& e) {
  // cpp-httplib writes "Connection: close" when the request asked for it.
  auto& headers = const_cast<httplib::Request&>(req).headers;
  headers.erase("Connection");
  headers.emplace("Connection", "close");
  res.status = e.status;
  auto body = std::make_shared<std::string>(dump_json(error_json_for(req.path, e)));
  auto probe = std::make_shared<ConnectionProbe>(req.local_port, req.remote_addr, req.remote_port);
  res.set_content_provider(body->size(), "application/json",
                           [body, probe](size_t offset, size_t length, httplib::DataSink& sink) {
                             if (sink.write(body->data() + offset, length)) linger(probe->fd());
                             return false;  // "failed": cpp-httplib closes the connection
                           });
}

}  // namespace vireo::server
