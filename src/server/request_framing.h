// HTTP-level checks made before cpp-httplib reads a request body (in the pre-routing and
// Expect: 100-continue handlers). cpp-httplib 0.11 parses Content-Length with strtoull (-5 and
// "abc" become huge or 0), drains a declared body over its limit byte by byte until the read
// timeout, and keeps the connection open after any response it writes, so a body it never read
// would be parsed as the next request. Requests with such bodies are answered here, and their
// connection closed.
#pragma once
#include <httplib.h>

#include <optional>
#include <string>

#include "server/openai_errors.h"

namespace vireo::server {

// The message framing: 400 for a Content-Length that is not one decimal number (or conflicting
// ones), a Transfer-Encoding other than chunked, or both; 413 for a declared length over
// max_body_bytes. nullopt when the body can be read.
std::optional<ApiError> check_body_framing(const httplib::Request& req, size_t max_body_bytes);

// For a route taking a JSON body: 415 for a Content-Encoding other than identity (compressed
// bodies would bypass the size limit) or a media type other than application/json; 400 when the
// request has no body at all (no Content-Length, not chunked: HTTP/1.1's empty body).
std::optional<ApiError> check_json_body_headers(const httplib::Request& req);

// Content-Length > 0 or a Transfer-Encoding: bytes of a body follow the headers.
bool declares_body(const httplib::Request& req);

// "application/json", ignoring parameters (charset), case and spaces.
bool is_json_media_type(const std::string& content_type);

// Sends `e` with "Connection: close" and makes cpp-httplib close the connection once it is
// written: cpp-httplib closes only after a failed write, so the body provider reports failure
// after writing the whole body.
void send_error_and_close(const httplib::Request& req, httplib::Response& res, const ApiError& e);

}  // namespace vireo::server
