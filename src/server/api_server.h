// The OpenAI-compatible HTTP server (cpp-httplib). Lifecycle:
//   ApiServer s(opts); int port = s.bind();   // listener up: /health answers 503
//   std::thread t([&]{ s.run(); });            // serves until shutdown()
//   s.set_engine(engine);                      // model loaded: /health 200, /v1 routes open
//   s.shutdown();                              // graceful: see below; run() then returns
// Shutdown (SIGTERM/SIGINT in `vireo serve`): the listening socket closes at once (new
// connections are refused; a new request on a kept-alive connection gets 503); in-flight requests
// get up to options.shutdown_timeout_s to finish; the rest are aborted (a stream ends with an
// error event and [DONE], a plain request with 503).
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "engine/async_engine.h"
#include "server/server_context.h"

namespace httplib {
class Server;
}

namespace vireo::server {

class ApiServer {
 public:
  explicit ApiServer(ServerOptions options);
  ~ApiServer();
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Binds host:port (port 0 = any free one) and returns the port, or options.uds (returns 0); throws
  // vireo::Error on failure.
  int bind();
  // Accepts connections until shutdown(); call after bind(), from its own thread if needed.
  void run();
  void set_engine(std::shared_ptr<AsyncEngine> engine);
  void set_load_error(const std::string& message);  // /health keeps answering 503 with it
  // Drains, aborts what is left, stops the listener. Idempotent; safe from any thread.
  void shutdown();
  // Stops the listener immediately (tests, or after shutdown()).
  void stop();

  ServerContext& context() { return *ctx_; }
  int port() const { return port_; }
  int listen_fd() const { return listen_fd_; }  // the listening socket after bind() (tests: its options)

 private:
  void install_routes();
  int bind_uds(const std::string& path);
  std::unique_ptr<ServerContext> ctx_;
  std::unique_ptr<httplib::Server> svr_;
  int port_ = -1;
  int listen_fd_ = -1;  // the socket cpp-httplib listens on (seen by its socket-options hook)
  std::atomic<bool> bound_uds_{false};  // bind() created options.uds: stop() removes it
  std::once_flag shutdown_once_;
};

}  // namespace vireo::server
