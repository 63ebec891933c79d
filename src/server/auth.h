// API-key check for /v1 routes: "Authorization: Bearer <key>", compared in constant time so the
// response time does not leak how much of a guess was right.
#pragma once
#include <string>
#include <string_view>

namespace vireo::server {

bool constant_time_equal(std::string_view a, std::string_view b);
// True when `authorization_header` is "Bearer <key>" with exactly `api_key`.
bool bearer_matches(std::string_view authorization_header, std::string_view api_key);
// The routes the key protects (vLLM: every path under /v1).
bool route_needs_auth(std::string_view path);

}  // namespace vireo::server
