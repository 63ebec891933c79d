#include "server/auth.h"

#include <cstdint>

namespace vireo::server {

bool constant_time_equal(std::string_view a, std::string_view b) {
  // Walk the longer length whatever the inputs so timing depends only on the sizes.
  size_t n = a.size() > b.size() ? a.size() : b.size();
  volatile uint8_t diff = static_cast<uint8_t>(a.size() != b.size());
  for (size_t i = 0; i < n; ++i) {
    uint8_t x = i < a.size() ? static_cast<uint8_t>(a[i]) : 0;
    uint8_t y = i < b.size() ? static_cast<uint8_t>(b[i]) : 0;
    diff = diff | static_cast<uint8_t>(x ^ y);
  }
  return diff == 0;
}

bool bearer_matches(std::string_view header, std::string_view api_key) {
  constexpr std::string_view kPrefix = "Bearer ";
  if (header.size() < kPrefix.size() || header.substr(0, kPrefix.size()) != kPrefix) {
    constant_time_equal(header, api_key);  // same work on the failure path
    return false;
  }
  return constant_time_equal(header.substr(kPrefix.size()), api_key);
}

bool route_needs_auth(std::string_view path) { return path == "/v1" || path.substr(0, 4) == "/v1/"; }

}  // namespace vireo::server
