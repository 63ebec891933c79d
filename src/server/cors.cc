#include "server/cors.h"

#include <algorithm>

namespace vireo::server {
namespace {

bool listed(const std::vector<std::string>& allowed, const std::string& v) {
  return std::find(allowed.begin(), allowed.end(), "*") != allowed.end() ||
         std::find(allowed.begin(), allowed.end(), v) != allowed.end();
}
bool any(const std::vector<std::string>& allowed) {
  return std::find(allowed.begin(), allowed.end(), "*") != allowed.end();
}

// Starlette: "*" unless credentials are allowed (browsers refuse "*" with credentials) or the origins
// are a list, in which case the request's own origin is echoed and caches must vary on it.
void set_allow_origin(const CorsOptions& o, const std::string& origin, httplib::Response& res) {
  if (any(o.allowed_origins) && !o.allow_credentials) {
    res.set_header("Access-Control-Allow-Origin", "*");
  } else {
    res.set_header("Access-Control-Allow-Origin", origin);
    res.set_header("Vary", "Origin");
  }
  if (o.allow_credentials) res.set_header("Access-Control-Allow-Credentials", "true");
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

bool answer_cors_preflight(const CorsOptions& o, const httplib::Request& req, httplib::Response& res) {
  if (req.method != "OPTIONS" || !req.has_header("Origin") || !req.has_header("Access-Control-Request-Method"))
    return false;
  const std::string origin = req.get_header_value("Origin");
  const std::string method = req.get_header_value("Access-Control-Request-Method");
  std::string failure;
  if (!listed(o.allowed_origins, origin)) failure = "origin";
  else if (!listed(o.allowed_methods, method)) failure = "method";
  else if (!any(o.allowed_headers) && req.has_header("Access-Control-Request-Headers")) {
    // Each requested header, comma-separated and case-insensitive, must be on the list.
    std::string h = req.get_header_value("Access-Control-Request-Headers");
    std::transform(h.begin(), h.end(), h.begin(), [](unsigned char c) { return std::tolower(c); });
    size_t pos = 0;
    while (pos <= h.size() && failure.empty()) {
      size_t end = h.find(',', pos);
      if (end == std::string::npos) end = h.size();
      std::string name = h.substr(pos, end - pos);
      name.erase(0, name.find_first_not_of(" \t"));
      name.erase(name.find_last_not_of(" \t") + 1);
      bool ok = name.empty();
      for (std::string a : o.allowed_headers) {
        std::transform(a.begin(), a.end(), a.begin(), [](unsigned char c) { return std::tolower(c); });
        ok = ok || a == name;
      }
      if (!ok) failure = "headers";
      pos = end + 1;
    }
  }
  res.set_header("Access-Control-Allow-Methods",
                 any(o.allowed_methods) ? "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT" : join(o.allowed_methods));
  res.set_header("Access-Control-Max-Age", "600");
  if (any(o.allowed_headers) && req.has_header("Access-Control-Request-Headers"))
    res.set_header("Access-Control-Allow-Headers", req.get_header_value("Access-Control-Request-Headers"));
  else if (!any(o.allowed_headers))
    res.set_header("Access-Control-Allow-Headers", join(o.allowed_headers));
  if (!failure.empty()) {
    res.status = 400;
    res.set_content("Disallowed CORS " + failure, "text/plain; charset=utf-8");
    return true;
  }
  set_allow_origin(o, origin, res);
  res.status = 200;
  res.set_content("OK", "text/plain; charset=utf-8");
  return true;
}

void add_cors_headers(const CorsOptions& o, const httplib::Request& req, httplib::Response& res) {
  if (!req.has_header("Origin")) return;
  const std::string origin = req.get_header_value("Origin");
  if (listed(o.allowed_origins, origin)) set_allow_origin(o, origin, res);
}

}  // namespace vireo::server
