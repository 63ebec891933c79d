#include "server/api_server.h"

#include <httplib.h>
#include <signal.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <iterator>
#include <optional>
#include <regex>
#include <string_view>
#include <thread>

#include "core/error.h"
#include "core/log.h"
#include "server/auth.h"
#include "server/completion_handler.h"
#include "server/http_util.h"
#include "server/embeddings_handler.h"
#include "server/info_handlers.h"
#include "server/invocations_handler.h"
#include "server/score_handlers.h"
#include "server/lora_handlers.h"
#include "server/messages_handler.h"
#include "server/request_framing.h"
#include "server/responses_handler.h"
#include "server/tls_server.h"

namespace vireo::server {
namespace {

constexpr int kListenBacklog = 4096;  // connections waiting to be accepted (uvicorn: 2048)

using Handler = void (*)(ServerContext&, const httplib::Request&, httplib::Response&);

struct Route {
  const char* method;
  const char* path;  // a regular expression (cpp-httplib's route pattern); groups reach the handler
  Handler handler;
  bool needs_engine;
  bool generates;  // refused while draining
  bool json_body = true;  // a POST needs a JSON body (vLLM's validate_json_request)
  bool pooling_only = false;  // served by --runner pooling only; elsewhere 404, as vLLM registers it only there
};

const Route kRoutes[] = {
    {"POST", "/v1/completions", handle_completions, true, true},
    {"POST", "/v1/chat/completions", handle_chat_completions, true, true},
    {"POST", "/v1/responses", handle_responses, true, true},
    {"POST", "/v1/messages", handle_messages, true, true},  // Anthropic's Messages API (vLLM serves it too)
    {"POST", "/v1/messages/count_tokens", handle_count_tokens, true, false},
    {"POST", "/invocations", handle_invocations, true, true},  // SageMaker's: routed by the body's shape
    {"POST", "/v1/embeddings", handle_embeddings, true, true, true, true},
    {"POST", "/pooling", handle_pooling, true, true, true, true},
    {"POST", "/classify", handle_classify, true, true, true, true},
    {"POST", "/score", handle_score, true, true, true, true},
    {"POST", "/v1/score", handle_score, true, true, true, true},
    {"POST", "/rerank", handle_rerank, true, true, true, true},
    {"POST", "/v1/rerank", handle_rerank, true, true, true, true},
    {"POST", "/v2/rerank", handle_rerank, true, true, true, true},
    {"GET", "/v1/responses/([A-Za-z0-9_.-]+)", handle_get_response, false, false},
    {"GET", "/v1/models", handle_models, true, false},
    // Names may hold '/' (Qwen/Qwen3-8B): the SDKs send it percent-encoded, cpp-httplib decodes the path.
    {"GET", "/v1/models/(.+)", handle_model, true, false},
    {"POST", "/tokenize", handle_tokenize, true, false},
    {"POST", "/v1/load_lora_adapter", handle_load_lora, true, false},
    {"POST", "/v1/unload_lora_adapter", handle_unload_lora, true, false},
    {"POST", "/detokenize", handle_detokenize, true, false},
    {"GET", "/version", handle_version, false, false},
    {"GET", "/tokenizer_info", handle_tokenizer_info, true, false},
    {"GET", "/metrics", handle_metrics, false, false},
    {"GET", "/load", handle_load, false, false},
    {"GET", "/health", nullptr, false, false},
    // SageMaker's health check, which vLLM answers on GET and POST (no body needed).
    {"GET", "/ping", nullptr, false, false},
    {"POST", "/ping", nullptr, false, false, false},
};

bool method_matches(const std::string& method, const Route& r) {
  return method == r.method || (method == "HEAD" && std::string(r.method) == "GET");
}

// The route for (method, path); `allow` gets the path's methods, empty when the path is unknown.
const Route* find_route(const std::string& method, const std::string& path, std::string& allow) {
  // Every request comes here (twice): plain paths compare as strings, only pattern routes (a group)
  // pay for a regex.
  static const std::vector<std::optional<std::regex>> patterns = [] {
    std::vector<std::optional<std::regex>> v;
    for (const auto& r : kRoutes)
      v.push_back(std::string_view(r.path).find('(') == std::string_view::npos ? std::nullopt
                                                                              : std::optional<std::regex>(r.path));
    return v;
  }();
  const Route* found = nullptr;
  for (size_t i = 0; i < std::size(kRoutes); ++i) {
    const Route& r = kRoutes[i];
    if (patterns[i] ? !std::regex_match(path, *patterns[i]) : path != r.path) continue;
    allow += (allow.empty() ? "" : ", ") + std::string(r.method);
    if (!found && method_matches(method, r)) found = &r;
  }
  return found;
}

void run_guarded(ServerContext& ctx, Handler h, const httplib::Request& req, httplib::Response& res) {
  try {
    // cpp-httplib applies its payload limit to Content-Length bodies only; a chunked body is read
    // whole, so its size is checked here, before any parsing or tokenizing.
    if (req.body.size() > ctx.options().max_body_bytes)
      throw ApiError(413, "RequestTooLargeError",
                     "Request body too large (limit " + std::to_string(ctx.options().max_body_bytes) + " bytes)");
    h(ctx, req, res);
  } catch (const ApiError& e) {
    send_error(req, res, e);
  } catch (const Error& e) {
    send_error(req, res, bad_request(e.what()));  // engine / tokenizer validation: the request's fault
  } catch (const std::exception& e) {
    log_error("server: {} {} failed: {}", req.method, req.path, e.what());
    send_error(req, res, ApiError(500, error_type_for_status(500), std::string("Internal server error: ") + e.what()));
  }
}

// 401 / 404 / 405 (with Allow) / 503 from the API key, the route table and the server's state.
std::optional<ApiError> route_error(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  auto error = [](int status, const std::string& message) { return ApiError(status, error_type_for_status(status), message); };
  // The key first, as vLLM's middleware: without it a client learns nothing about /v1 paths and methods.
  const auto& key = ctx.options().api_key;
  if (key && route_needs_auth(req.path)) {
    const std::string header = req.get_header_value("Authorization");
    // Anthropic's clients send the key as "x-api-key: <key>" instead.
    const std::string x_api_key = req.get_header_value("x-api-key");
    auto matches = [&](const std::string& k) {
      const bool bearer = bearer_matches(header, k);
      const bool x = !x_api_key.empty() && constant_time_equal(x_api_key, k);
      return bearer || x;
    };
    bool ok = matches(*key);
    for (const auto& more : ctx.options().more_api_keys) ok = matches(more) || ok;  // all compared
    if (!ok)
      return error(401, "Unauthorized: a valid 'Authorization: Bearer <api key>' (or 'x-api-key: <api key>') header is required");
  }
  std::string allow;
  const Route* route = find_route(req.method, req.path, allow);
  if (allow.empty()) return error(404, "Not Found: " + req.path);
  if (!route) {
    res.set_header("Allow", allow);
    return error(405, "Method Not Allowed: " + req.method + " " + req.path);
  }
  if (route->needs_engine && !ctx.engine()) {
    auto err = ctx.load_error();
    return error(503, err ? "The model failed to load: " + *err : "The model is still loading");
  }
  if (route->pooling_only && ctx.engine() && !ctx.engine()->config().pooling.enabled)
    return error(404, "Not Found: " + req.path);
  if (route->generates && ctx.draining) return error(503, "The server is shutting down");
  if (std::string(route->method) == "POST" && route->json_body) return check_json_body_headers(req);
  return std::nullopt;
}

// Everything decided before cpp-httplib reads the body (request_framing.h): body framing first
// (the connection's byte stream depends on it), then the route. An answer here leaves a declared
// body unread, so its connection is closed.
// /health, /ping: 200 once the engine is up (vLLM answers with an empty body).
void answer_health(ServerContext& ctx, httplib::Response& res) {
  if (ctx.engine()) {
    res.status = 200;
  } else {
    auto err = ctx.load_error();
    send_error(res, 503, err ? "The model failed to load: " + *err : "The model is still loading");
  }
}

bool answer_early(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  std::optional<ApiError> err = check_body_framing(req, ctx.options().max_body_bytes);
  if (!err) err = route_error(ctx, req, res);
  if (!err) {
    // A POST without Content-Length or chunking has no body (RFC 9112), but cpp-httplib would read
    // one until the peer closes: a body-less route (POST /ping, SageMaker's) is answered here.
    std::string allow;
    const Route* route = find_route(req.method, req.path, allow);
    if (route && !route->handler && !req.has_header("Content-Length") && !req.has_header("Transfer-Encoding")) {
      answer_health(ctx, res);
      return true;
    }
    return false;
  }
  if (declares_body(req) || req.has_header("Expect")) send_error_and_close(req, res, *err);
  else send_error(req, res, *err);
  return true;
}

}  // namespace

ApiServer::ApiServer(ServerOptions options)
    : ctx_(std::make_unique<ServerContext>(std::move(options))), svr_(make_http_server(ctx_->options().tls)) {
  // A client vanishing mid-write must surface as a failed write, not kill the process.
  signal(SIGPIPE, SIG_IGN);
  int threads = std::max(8, ctx_->options().num_threads);
  svr_->new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  svr_->set_payload_max_length(ctx_->options().max_body_bytes);
  svr_->set_keep_alive_timeout(ctx_->options().keep_alive_timeout_s);
  // cpp-httplib closes a keep-alive connection after 5 requests by default; uvicorn (vLLM) never does,
  // so pooled clients (the openai SDK, benchmark clients) would reconnect every fifth request. An idle
  // connection holds a worker thread only for keep_alive_timeout_s, as before.
  svr_->set_keep_alive_max_count(ctx_->options().keep_alive_max_requests);
  svr_->set_read_timeout(30, 0);
  svr_->set_write_timeout(30, 0);
  // SO_REUSEADDR only: cpp-httplib's default also sets SO_REUSEPORT, which lets a second server bind
  // the same port and take half of the connections; like uvicorn, the second one must fail to start.
  // TCP_NODELAY (as uvicorn sets it): a stream writes one small chunk a token, and with Nagle's algorithm
  // each chunk after the first waits for the client's (delayed, up to 40 ms) ACK of the previous one, so
  // tokens reached clients in ~40 ms bursts (H200: median TTFT 44 ms, TPOT 0.31 ms for one client).
  // Accepted sockets inherit it from the listening socket.
  svr_->set_tcp_nodelay(true);
  svr_->set_socket_options([this](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, reinterpret_cast<const void*>(&yes), sizeof(yes));
    setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, reinterpret_cast<const void*>(&yes), sizeof(yes));
    listen_fd_ = sock;  // bind tries addresses in turn; the last socket it configures is the one it keeps
  });
  install_routes();
}

ApiServer::~ApiServer() { stop(); }

void ApiServer::install_routes() {
  ServerContext& ctx = *ctx_;
  svr_->set_pre_routing_handler([&ctx](const httplib::Request& req, httplib::Response& res) {
    // API responses are never byte ranges (vLLM ignores Range): without this cpp-httplib would cut
    // the JSON to the requested bytes, answer 416 with no body, or repeat the body per range.
    const_cast<httplib::Request&>(req).ranges.clear();
    if (answer_cors_preflight(ctx.options().cors, req, res)) return httplib::Server::HandlerResponse::Handled;
    add_cors_headers(ctx.options().cors, req, res);  // kept on whatever answers below
    // vLLM's --enable-request-id-headers: the request's X-Request-Id echoed, else a new one (32 hex digits).
    if (ctx.options().enable_request_id_headers) {
      const std::string given = req.get_header_value("X-Request-Id");
      res.set_header("X-Request-Id", !given.empty() ? given : ctx.new_id("r").substr(2));
    }
    return answer_early(ctx, req, res) ? httplib::Server::HandlerResponse::Handled
                                       : httplib::Server::HandlerResponse::Unhandled;
  });
  // A client waiting for "100 Continue" gets the final answer instead, and sends no body.
  svr_->set_expect_100_continue_handler([&ctx](const httplib::Request& req, httplib::Response& res) {
    return answer_early(ctx, req, res) ? res.status : 100;
  });
  for (const auto& route : kRoutes) {
    httplib::Server::Handler fn;
    if (route.handler) {
      Handler h = route.handler;
      fn = [&ctx, h](const httplib::Request& req, httplib::Response& res) { run_guarded(ctx, h, req, res); };
    } else {
      fn = [&ctx](const httplib::Request&, httplib::Response& res) { answer_health(ctx, res); };
    }
    if (std::string(route.method) == "GET") svr_->Get(route.path, fn);
    else svr_->Post(route.path, fn);
  }
  svr_->set_error_handler(httplib::Server::HandlerWithResponse([&ctx](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty() || res.content_provider_) return httplib::Server::HandlerResponse::Unhandled;
    // Errors cpp-httplib detects itself, before any handler; the request holds what was parsed.
    // Where the next request would start on the connection is then unknown, so it is closed.
    std::string message = "HTTP " + std::to_string(res.status);
    if (res.status == 413) {
      message = "Request body too large (limit " + std::to_string(ctx.options().max_body_bytes) + " bytes)";
    } else if (res.status == 414) {
      message = "URI Too Long: the request line is over 8192 bytes";
    } else if (res.status == 400) {
      if (req.path.empty())  // set only once the request line parsed
        message = "Malformed HTTP request line (expected '<METHOD> <target> HTTP/1.1', method in upper case)";
      else if (req.remote_addr.empty())  // set only once the headers parsed
        message = "Malformed HTTP request headers (a header line is over 8192 bytes, or the headers are incomplete)";
      else
        message = "The request body could not be read (truncated, or malformed chunked encoding)";
    }
    send_error_and_close(req, res, ApiError(res.status, error_type_for_status(res.status), message));
    return httplib::Server::HandlerResponse::Handled;
  }));
  svr_->set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(req, res, ApiError(500, error_type_for_status(500), "Internal server error: " + what));
  });
}

int ApiServer::bind() {
  const auto& o = ctx_->options();
  if (!o.uds.empty()) return bind_uds(o.uds);
  int port = o.port == 0 ? svr_->bind_to_any_port(o.host) : (svr_->bind_to_port(o.host, o.port) ? o.port : -1);
  if (port < 0) throw Error("server: cannot listen on " + o.host + ":" + std::to_string(o.port));
  // cpp-httplib listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG, compiled into Debian's shared
  // library): a benchmark opening 512 connections at once overflowed the accept queue, the dropped SYNs
  // were retried after 1, 3, 7 s and some connections were reset (H200, 512 concurrent clients: P99
  // TTFT 14-28 s, 55 of 1,536 requests failed). Listening again on a listening socket only raises
  // the backlog (to net.core.somaxconn at most); uvicorn, under vLLM, uses 2048.
  if (listen_fd_ >= 0) ::listen(listen_fd_, kListenBacklog);
  port_ = port;
  return port;
}

// vLLM's --uds: uvicorn's bind to a Unix socket path. A socket file left there by an earlier server is
// replaced; any other file is not touched.
int ApiServer::bind_uds(const std::string& path) {
  if (path.size() >= sizeof(sockaddr_un{}.sun_path))
    throw Error("server: --uds " + path + ": longer than a Unix socket path may be (" +
                std::to_string(sizeof(sockaddr_un{}.sun_path) - 1) + " bytes)");
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) throw Error("server: --uds " + path + ": the path exists and is not a socket");
    ::unlink(path.c_str());
  }
  svr_->set_address_family(AF_UNIX);
  svr_->set_tcp_nodelay(false);  // no TCP here (the socket-options hook's TCP_NODELAY fails harmlessly)
  // A non-zero port: with 0 cpp-httplib asks the socket for its TCP port, which a Unix socket has not.
  if (!svr_->bind_to_port(path, 1)) throw Error("server: cannot listen on the Unix socket " + path);
  if (listen_fd_ >= 0) ::listen(listen_fd_, kListenBacklog);
  bound_uds_ = true;
  port_ = 0;
  return 0;
}

void ApiServer::run() { svr_->listen_after_bind(); }

void ApiServer::set_engine(std::shared_ptr<AsyncEngine> engine) { ctx_->set_engine(std::move(engine)); }

void ApiServer::set_load_error(const std::string& message) { ctx_->set_load_error(message); }

void ApiServer::shutdown() {
  std::call_once(shutdown_once_, [this] {
    ServerContext& ctx = *ctx_;
    ctx.draining = true;
    // Close the listening socket as soon as no stream is between its handler and its writer
    // (cpp-httplib would skip such a writer): no new connections from then on. Streams already
    // writing run on (the writer does all its work in one call); run() returns once the pool
    // threads are done.
    auto start_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (ctx.num_starting > 0 && std::chrono::steady_clock::now() < start_deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    stop();
    auto deadline = std::chrono::steady_clock::now() +
                    std::chrono::milliseconds(static_cast<int64_t>(ctx.options().shutdown_timeout_s * 1000));
    size_t left = ctx.num_in_flight();
    if (left > 0) log_info("Shutting down: draining {} in-flight request(s), up to {} s", left, ctx.options().shutdown_timeout_s);
    if (!ctx.wait_drained(deadline)) {
      log_info("Shutdown timeout: aborting {} request(s)", ctx.num_in_flight());
      ctx.aborting_all = true;
      ctx.abort_all_in_flight();
      ctx.wait_drained(std::chrono::steady_clock::now() + std::chrono::seconds(10));
    }
    // Let handlers write their last bytes (error events, [DONE]).
    auto jobs_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (ctx.active_jobs > 0 && std::chrono::steady_clock::now() < jobs_deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  });
}

void ApiServer::stop() {
  if (svr_) svr_->stop();
  if (bound_uds_.exchange(false)) {
    ::unlink(ctx_->options().uds.c_str());
  }
}

}  // namespace vireo::server
