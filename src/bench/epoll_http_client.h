// A small single-threaded HTTP/1.1 client on epoll, for `bench serve`: hundreds of concurrent
// streaming requests cost one thread, and chunks are timestamped the moment they are read, so the
// client adds (almost) no latency of its own. Keep-alive connections are pooled and reused.
// Not thread-safe: start(), poll() and the handler callbacks all run on the caller's thread.
//
// Timestamps: bytes are stamped right after the recv() that delivered them, before any parsing.
// Reading and parsing are decoupled: while the client parses a batch of responses (or sends a
// burst of requests), it looks for newly readable sockets every few tens of microseconds
// (epoll_wait with a zero timeout), reads and stamps them, and parses them later with those
// stamps. So under load a chunk's timestamp is late by at most one such slice, not by a whole
// batch of parsing.
#pragma once
#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <netinet/in.h>

struct ssl_ctx_st;  // OpenSSL's SSL_CTX

namespace vireo::bench {

class StreamHandler {
 public:
  virtual ~StreamHandler() = default;
  virtual void on_status(int status, double now_s) {}
  // Decoded body bytes (chunked encoding removed), as they arrive.
  virtual void on_body(std::string_view data, double now_s) = 0;
  // Exactly one of these ends every started request.
  virtual void on_complete(double now_s) = 0;
  virtual void on_error(const std::string& message, double now_s) = 0;
};

struct HttpRequest {
  std::string method = "POST";
  std::string path = "/";
  std::string body;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  double timeout_s = 0;  // 0 = none
};

// HTTPS (an https:// base URL): TLS 1.2+ on every connection, the server's certificate checked against
// OpenSSL's default CAs (SSL_CERT_FILE / SSL_CERT_DIR honoured) or ca_file, and its name against host.
struct ClientTls {
  bool enabled = false;
  bool verify = true;    // false: any certificate (bench serve --insecure)
  std::string ca_file;   // PEM CAs instead of the defaults (tests)
};

class EpollHttpClient {
 public:
  // host: an IPv4/IPv6 literal or a name (resolved once, here). Throws vireo::Error.
  EpollHttpClient(const std::string& host, int port, const ClientTls& tls = {});
  ~EpollHttpClient();
  EpollHttpClient(const EpollHttpClient&) = delete;
  EpollHttpClient& operator=(const EpollHttpClient&) = delete;

  // Sends `req` on an idle pooled connection or a new one; `handler` must outlive the request.
  void start(const HttpRequest& req, StreamHandler* handler);
  // Reads and stamps whatever is ready now, if the last look was more than a slice ago; the bytes
  // are parsed by the next poll(). Cheap; for callers doing other work between polls.
  void stamp_ready();
  // Waits up to timeout_ms for socket events and dispatches them. Returns after one wait.
  void poll(int timeout_ms);
  int in_flight() const { return num_in_flight_; }
  // Seconds on the steady clock since this client was made (the timestamps given to handlers).
  double now() const;
  std::chrono::steady_clock::time_point origin() const { return t0_; }

 private:
  struct Conn;
  void open_conn(Conn* c);
  void handshake(Conn* c);                           // TLS: drives the handshake, then sends the request
  long read_some(Conn* c, char* buf, size_t n);      // recv()'s contract (errno EAGAIN when nothing is ready)
  long write_some(Conn* c, const char* buf, size_t n);
  void send_request(Conn* c, const HttpRequest& req, StreamHandler* h, bool reused);
  void handle_event(Conn* c, uint32_t events);
  void drain(Conn* c);
  void look(int timeout_ms, bool dispatch);
  void process_pending();
  void on_readable(Conn* c);
  void on_writable(Conn* c);
  bool parse_input(Conn* c, double t);  // false once the connection was closed
  void finish(Conn* c, bool keep_alive, double t);
  void fail(Conn* c, const std::string& msg, double t);
  void close_conn(Conn* c);
  void watch(Conn* c, bool want_write);
  void check_timeouts(double t);

  struct SslCtxFree {
    void operator()(ssl_ctx_st* ctx) const;
  };
  std::unique_ptr<ssl_ctx_st, SslCtxFree> tls_ctx_;  // null: plain HTTP (owned: freed on a throwing constructor too)
  std::string tls_host_;           // SNI and the name the certificate must carry
  int epfd_ = -1;
  sockaddr_storage addr_{};
  socklen_t addr_len_ = 0;
  std::string host_header_;
  std::chrono::steady_clock::time_point t0_;
  std::vector<std::unique_ptr<Conn>> conns_;  // all live connections
  std::vector<Conn*> idle_;
  std::vector<Conn*> pending_;  // read and stamped, not parsed yet
  int num_in_flight_ = 0;
  double last_look_ = 0;        // when epoll was last asked for ready sockets
  std::unique_ptr<char[]> rbuf_;
  std::vector<uint32_t> ev_flags_;  // scratch for look()
  std::vector<Conn*> ev_conns_;
};

}  // namespace vireo::bench
