// CORS as vLLM's server does it (Starlette's CORSMiddleware with --allowed-origins / -methods /
// -headers / --allow-credentials (also spelt --allowed-credentials), all origins allowed by default), so browser clients can call the
// API: a preflight OPTIONS is answered before routing, and responses to a request with an allowed
// Origin carry Access-Control-Allow-Origin.
#pragma once
#include <httplib.h>

#include <string>
#include <vector>

namespace vireo::server {

struct CorsOptions {
  std::vector<std::string> allowed_origins{"*"};
  std::vector<std::string> allowed_methods{"*"};
  std::vector<std::string> allowed_headers{"*"};
  bool allow_credentials = false;
};

// A preflight request (OPTIONS with Origin and Access-Control-Request-Method): fills `res` (200 "OK",
// or 400 naming what is disallowed) and returns true. Any other request: false, `res` untouched.
bool answer_cors_preflight(const CorsOptions& o, const httplib::Request& req, httplib::Response& res);
// The headers a simple (non-preflight) request's response gets when its Origin is allowed.
void add_cors_headers(const CorsOptions& o, const httplib::Request& req, httplib::Response& res);

}  // namespace vireo::server
