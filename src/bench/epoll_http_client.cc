#include "bench/epoll_http_client.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <string_view>

#include "bench/chunked_decoder.h"
#include "core/error.h"
#include "core/openssl_error.h"

namespace vireo::bench {

struct EpollHttpClient::Conn {
  int fd = -1;
  SSL* ssl = nullptr;  // HTTPS: this connection's TLS session
  enum class State { kIdle, kConnecting, kHandshake, kWriting, kHeaders, kBody } state = State::kIdle;
  HttpRequest req;              // kept to retry once on a stale keep-alive connection
  StreamHandler* handler = nullptr;
  bool reused = false;
  bool got_bytes = false;
  std::string out;
  size_t out_off = 0;
  std::string in;               // unparsed input
  std::string decoded;
  bool chunked = false;
  bool keep_alive = true;
  long long content_length = -1;
  long long body_read = 0;
  ChunkedDecoder dechunk;
  double deadline = 0;          // 0 = none
  bool watching_write = false;  // EPOLLOUT registered
  // Read by drain(), not parsed yet: the bytes, and for each recv() the end offset of its bytes
  // in `raw` and when it returned.
  std::string raw;
  std::vector<std::pair<size_t, double>> marks;
  bool pending = false;         // in pending_
  bool more_input = false;      // parse_input() is not seeing the last bytes read
  int read_status = 0;          // drain() saw: 0 = open, 1 = EOF, -1 = error
  int read_errno = 0;
  double eof_ts = 0;            // when drain() saw the EOF / error
};

namespace {

constexpr size_t kReadBuf = 65536;
constexpr double kLookSlice = 20e-6;  // s between looks for ready sockets while busy
constexpr uint32_t kReadable = EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR;

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}
bool icontains(std::string_view hay, std::string_view needle) {
  for (size_t i = 0; i + needle.size() <= hay.size(); ++i)
    if (iequals(hay.substr(i, needle.size()), needle)) return true;
  return false;
}

bool is_ip_literal(const std::string& host) {
  in6_addr a6{};
  in_addr a4{};
  return inet_pton(AF_INET, host.c_str(), &a4) == 1 || inet_pton(AF_INET6, host.c_str(), &a6) == 1;
}

}  // namespace
EpollHttpClient::EpollHttpClient(const std::string& host, int port, const ClientTls& tls)
    : t0_(std::chrono::steady_clock::now()) {
  if (tls.enabled) {
    tls_ctx_.reset(SSL_CTX_new(TLS_client_method()));
    if (tls_ctx_ == nullptr) throw Error("bench: TLS: " + openssl_error("no OpenSSL context"));
    SSL_CTX* ctx = tls_ctx_.get();
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    // on_writable resumes a write from out_off: partial writes as send()'s, the buffer may be a new one.
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    signal(SIGPIPE, SIG_IGN);  // OpenSSL writes with write(), not send(MSG_NOSIGNAL)
    if (tls.verify) {
      SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
      const int ok = tls.ca_file.empty() ? SSL_CTX_set_default_verify_paths(ctx)
                                         : SSL_CTX_load_verify_locations(ctx, tls.ca_file.c_str(), nullptr);
      if (ok != 1) throw Error("bench: TLS: cannot load CA certificates: " + openssl_error("unknown error"));
    }
    tls_host_ = host;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  std::string port_s = std::to_string(port);
  int rc = getaddrinfo(host.c_str(), port_s.c_str(), &hints, &res);
  if (rc != 0 || !res) throw Error("bench: cannot resolve host '" + host + "': " + gai_strerror(rc));
  std::memcpy(&addr_, res->ai_addr, res->ai_addrlen);
  addr_len_ = static_cast<socklen_t>(res->ai_addrlen);
  freeaddrinfo(res);
  host_header_ = (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + port_s;
  rbuf_ = std::make_unique<char[]>(kReadBuf);
  epfd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epfd_ < 0) throw Error(std::string("bench: epoll_create1 failed: ") + std::strerror(errno));
}

EpollHttpClient::~EpollHttpClient() {
  for (auto& c : conns_) {
    if (c->ssl) SSL_free(c->ssl);
    if (c->fd >= 0) ::close(c->fd);
  }
  if (epfd_ >= 0) ::close(epfd_);
}

void EpollHttpClient::SslCtxFree::operator()(ssl_ctx_st* ctx) const { SSL_CTX_free(ctx); }

double EpollHttpClient::now() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
}

void EpollHttpClient::open_conn(Conn* c) {
  c->fd = ::socket(addr_.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (c->fd < 0) throw Error(std::string("bench: socket() failed: ") + std::strerror(errno));
  int one = 1;
  setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  int rc = ::connect(c->fd, reinterpret_cast<const sockaddr*>(&addr_), addr_len_);
  // Connected at once (loopback): plain HTTP writes now; TLS starts its handshake at the first EPOLLOUT.
  c->state = (rc == 0 && tls_ctx_ == nullptr) ? Conn::State::kWriting : Conn::State::kConnecting;
  if (rc != 0 && errno != EINPROGRESS) {
    c->state = Conn::State::kConnecting;  // the error surfaces as EPOLLERR on the first wait
  }
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP;
  ev.data.ptr = c;
  epoll_ctl(epfd_, EPOLL_CTL_ADD, c->fd, &ev);
  c->watching_write = true;
}

void EpollHttpClient::start(const HttpRequest& req, StreamHandler* handler) {
  Conn* c = nullptr;
  bool reused = false;
  if (!idle_.empty()) {
    c = idle_.back();
    idle_.pop_back();
    reused = true;
  } else {
    conns_.push_back(std::make_unique<Conn>());
    c = conns_.back().get();
    open_conn(c);
  }
  ++num_in_flight_;
  send_request(c, req, handler, reused);
  stamp_ready();  // a burst of sends must not delay the stamps of answers arriving meanwhile
}

void EpollHttpClient::stamp_ready() {
  if (now() - last_look_ > kLookSlice) look(0, false);
}

void EpollHttpClient::send_request(Conn* c, const HttpRequest& req, StreamHandler* h, bool reused) {
  if (&c->req != &req) c->req = req;  // reuses the buffers of the connection's last request
  c->handler = h;
  c->reused = reused;
  c->got_bytes = false;
  c->raw.clear();
  c->marks.clear();
  c->read_status = 0;
  c->in.clear();
  c->decoded.clear();
  c->chunked = false;
  c->keep_alive = true;
  c->content_length = -1;
  c->body_read = 0;
  c->dechunk = ChunkedDecoder();
  c->deadline = req.timeout_s > 0 ? now() + req.timeout_s : 0;
  std::string& o = c->out;
  o.clear();
  o.append(req.method).append(" ").append(req.path).append(" HTTP/1.1\r\nHost: ").append(host_header_);
  o.append("\r\nAccept: */*\r\nConnection: keep-alive\r\n");
  for (auto& [k, v] : req.headers) o.append(k).append(": ").append(v).append("\r\n");
  if (req.method != "GET" || !req.body.empty()) {
    o.append("Content-Type: ").append(req.content_type).append("\r\nContent-Length: ");
    o.append(std::to_string(req.body.size())).append("\r\n");
  }
  o.append("\r\n").append(req.body);
  c->out_off = 0;
  if (c->state == Conn::State::kIdle) c->state = Conn::State::kWriting;
  // Send right away (a pooled or already connected socket): the request fits the socket buffer.
  if (c->state == Conn::State::kWriting) on_writable(c);
}

void EpollHttpClient::poll(int timeout_ms) {
  look(pending_.empty() ? timeout_ms : 0, true);
  process_pending();
  // Reap closed connections (closed ones have fd < 0 and are not in idle_ or pending_).
  conns_.erase(std::remove_if(conns_.begin(), conns_.end(), [](auto& c) { return c->fd < 0; }), conns_.end());
  check_timeouts(now());
}

// One epoll_wait. Readable sockets of requests in flight are drained (read and stamped) first,
// before anything else; with `dispatch`, the other events (connects, writes, idle connections
// closing) are handled too. Without it they are left for the next poll(): epoll is
// level-triggered, so they are reported again.
void EpollHttpClient::look(int timeout_ms, bool dispatch) {
  epoll_event events[256];
  int n = epoll_wait(epfd_, events, 256, timeout_ms);
  last_look_ = now();
  if (n < 0) {
    if (errno == EINTR) return;
    throw Error(std::string("bench: epoll_wait failed: ") + std::strerror(errno));
  }
  for (int i = 0; i < n; ++i) {
    auto* c = static_cast<Conn*>(events[i].data.ptr);
    if (c->fd >= 0 && c->state != Conn::State::kIdle && c->state != Conn::State::kConnecting &&
        c->state != Conn::State::kHandshake && (events[i].events & kReadable))
      drain(c);
  }
  if (!dispatch) return;
  for (int i = 0; i < n; ++i) {
    handle_event(static_cast<Conn*>(events[i].data.ptr), events[i].events);
    // Sending a burst of requests (e.g. on connections that just opened) takes a while: keep
    // stamping the answers that arrive meanwhile.
    if (now() - last_look_ > kLookSlice) look(0, false);
  }
}

// Parses what was drained, in order; keeps looking for newly readable sockets every slice so
// their stamps are not held back by this parsing.
void EpollHttpClient::process_pending() {
  for (size_t i = 0; i < pending_.size(); ++i) {
    Conn* c = pending_[i];
    c->pending = false;
    on_readable(c);
    if (now() - last_look_ > kLookSlice) look(0, false);
  }
  pending_.clear();
}

void EpollHttpClient::check_timeouts(double t) {
  for (auto& c : conns_) {
    if (c->fd >= 0 && c->state != Conn::State::kIdle && c->deadline > 0 && t > c->deadline) {
      fail(c.get(), "request timed out after " + std::to_string(c->req.timeout_s) + " s", t);
    }
  }
  conns_.erase(std::remove_if(conns_.begin(), conns_.end(), [](auto& c) { return c->fd < 0; }), conns_.end());
}

void EpollHttpClient::handle_event(Conn* c, uint32_t events) {
  if (c->fd < 0) return;
  if (c->state == Conn::State::kIdle) {
    // The server closed (or wrote to) an idle keep-alive connection: drop it.
    idle_.erase(std::remove(idle_.begin(), idle_.end(), c), idle_.end());
    close_conn(c);
    return;
  }
  bool was_connecting = c->state == Conn::State::kConnecting;
  if (was_connecting) {
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0 || (events & EPOLLERR)) {
      fail(c, std::string("connect failed: ") + std::strerror(err ? err : ECONNREFUSED), now());
      return;
    }
    if (!(events & EPOLLOUT)) return;
    c->state = Conn::State::kWriting;
    if (tls_ctx_) {
      c->ssl = SSL_new(tls_ctx_.get());
      if (c->ssl == nullptr || SSL_set_fd(c->ssl, c->fd) != 1) {
        fail(c, "TLS: " + openssl_error("cannot make a session"), now());
        return;
      }
      if (is_ip_literal(tls_host_)) {
        X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl), tls_host_.c_str());
      } else {
        SSL_set_tlsext_host_name(c->ssl, tls_host_.c_str());
        SSL_set1_host(c->ssl, tls_host_.c_str());
      }
      SSL_set_connect_state(c->ssl);
      c->state = Conn::State::kHandshake;
    }
  }
  if (c->state == Conn::State::kHandshake) {
    handshake(c);
    return;
  }
  if (c->state == Conn::State::kWriting && (events & EPOLLOUT)) on_writable(c);
  // Sockets of requests in flight were drained by look(); one that was connecting was not.
  if (was_connecting && c->fd >= 0 && (events & kReadable)) drain(c);
}

void EpollHttpClient::handshake(Conn* c) {
  ERR_clear_error();
  const int rc = SSL_do_handshake(c->ssl);
  if (rc == 1) {
    c->state = Conn::State::kWriting;
    on_writable(c);
    return;
  }
  const int e = SSL_get_error(c->ssl, rc);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
    watch(c, e == SSL_ERROR_WANT_WRITE);
    return;
  }
  const long v = SSL_get_verify_result(c->ssl);
  fail(c, std::string("TLS handshake failed: ") +
              (v != X509_V_OK ? X509_verify_cert_error_string(v) : openssl_error("the server closed the connection")),
       now());
}

long EpollHttpClient::read_some(Conn* c, char* buf, size_t n) {
  if (c->ssl == nullptr) return ::recv(c->fd, buf, n, 0);
  ERR_clear_error();
  const int r = SSL_read(c->ssl, buf, static_cast<int>(n));
  if (r > 0) return r;
  const int e = SSL_get_error(c->ssl, r);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
    errno = EAGAIN;
    return -1;
  }
  if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && errno == 0)) return 0;  // closed
  if (e != SSL_ERROR_SYSCALL) errno = EPROTO;
  return -1;
}

long EpollHttpClient::write_some(Conn* c, const char* buf, size_t n) {
  if (c->ssl == nullptr) return ::send(c->fd, buf, n, MSG_NOSIGNAL);
  ERR_clear_error();
  const int r = SSL_write(c->ssl, buf, static_cast<int>(n));
  if (r > 0) return r;
  const int e = SSL_get_error(c->ssl, r);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
    errno = EAGAIN;
    return -1;
  }
  if (e != SSL_ERROR_SYSCALL) errno = EPROTO;
  return -1;
}

void EpollHttpClient::on_writable(Conn* c) {
  while (c->out_off < c->out.size()) {
    ssize_t n = write_some(c, c->out.data() + c->out_off, c->out.size() - c->out_off);
    if (n > 0) {
      c->out_off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      watch(c, true);  // EPOLLOUT resumes us
      return;
    }
    fail(c, std::string("send failed: ") + std::strerror(errno), now());
    return;
  }
  if (c->state == Conn::State::kWriting) c->state = Conn::State::kHeaders;
  c->out.clear();
  c->out_off = 0;
  watch(c, false);  // level-triggered EPOLLOUT would otherwise spin
}

void EpollHttpClient::watch(Conn* c, bool want_write) {
  if (c->watching_write == want_write) return;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP | (want_write ? EPOLLOUT : 0u);
  ev.data.ptr = c;
  epoll_ctl(epfd_, EPOLL_CTL_MOD, c->fd, &ev);
  c->watching_write = want_write;
}

// Reads whatever is ready on `c`, stamping each recv() as it returns, and queues `c` for parsing.
void EpollHttpClient::drain(Conn* c) {
  if (c->read_status != 0) return;  // EOF / error already seen, not processed yet
  while (true) {
    ssize_t n = read_some(c, rbuf_.get(), kReadBuf);
    if (n > 0) {
      double t = now();
      c->raw.append(rbuf_.get(), static_cast<size_t>(n));
      c->marks.emplace_back(c->raw.size(), t);
      // Drained; level-triggered epoll tells of more. Not for TLS: a read returns one record, and the
      // records OpenSSL already holds wake no epoll.
      if (c->ssl == nullptr && static_cast<size_t>(n) < kReadBuf) break;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    c->read_status = n == 0 ? 1 : -1;
    c->read_errno = errno;
    c->eof_ts = now();
    break;
  }
  if (!c->pending && (!c->marks.empty() || c->read_status != 0)) {
    c->pending = true;
    pending_.push_back(c);
  }
}

// Parses what drain() read, each recv()'s bytes with its own stamp, then acts on EOF / error.
void EpollHttpClient::on_readable(Conn* c) {
  if (c->fd < 0) {
    c->raw.clear();
    c->marks.clear();
    c->read_status = 0;
    return;
  }
  size_t from = 0;
  for (size_t k = 0; k < c->marks.size(); ++k) {
    auto [end, t] = c->marks[k];
    c->got_bytes = true;
    c->in.append(c->raw, from, end - from);
    from = end;
    c->more_input = k + 1 < c->marks.size();
    if (!parse_input(c, t)) {  // the response ended (or failed); what follows is not ours
      c->more_input = false;
      c->raw.clear();
      c->marks.clear();
      c->read_status = 0;
      return;
    }
  }
  c->more_input = false;
  c->raw.clear();
  c->marks.clear();
  int status = c->read_status;
  c->read_status = 0;
  if (status == 0 || c->fd < 0) return;
  double t = c->eof_ts;
  // EOF or error.
  if (c->state == Conn::State::kBody && !c->chunked && c->content_length < 0) {
    finish(c, false, t);  // body delimited by close
    return;
  }
  if (c->reused && !c->got_bytes && c->state != Conn::State::kBody) {
    // A stale keep-alive connection: retry once on a fresh one.
    StreamHandler* h = c->handler;
    epoll_ctl(epfd_, EPOLL_CTL_DEL, c->fd, nullptr);
    ::close(c->fd);
    c->fd = -1;
    c->state = Conn::State::kIdle;
    open_conn(c);
    send_request(c, c->req, h, false);
    return;
  }
  fail(c, status > 0 ? "connection closed by server before the response ended"
                     : std::string("recv failed: ") + std::strerror(c->read_errno), t);
}

bool EpollHttpClient::parse_input(Conn* c, double t) {
  if (c->state == Conn::State::kWriting) c->state = Conn::State::kHeaders;  // early response
  if (c->state == Conn::State::kHeaders) {
    size_t end = c->in.find("\r\n\r\n");
    if (end == std::string::npos) {
      if (c->in.size() > 65536) {
        fail(c, "response headers too large", t);
        return false;
      }
      return true;
    }
    std::string_view head(c->in.data(), end);
    size_t line_end = head.find("\r\n");
    std::string_view status_line = head.substr(0, line_end);
    if (status_line.substr(0, 7) != "HTTP/1." || status_line.size() < 12) {
      fail(c, "malformed status line '" + std::string(status_line) + "'", t);
      return false;
    }
    int status = std::atoi(std::string(status_line.substr(9, 3)).c_str());
    c->keep_alive = status_line.substr(0, 8) == "HTTP/1.1";
    size_t pos = line_end == std::string_view::npos ? head.size() : line_end + 2;
    while (pos < head.size()) {
      size_t e = head.find("\r\n", pos);
      if (e == std::string_view::npos) e = head.size();
      std::string_view line = head.substr(pos, e - pos);
      pos = e + 2;
      size_t colon = line.find(':');
      if (colon == std::string_view::npos) continue;
      std::string_view key = line.substr(0, colon);
      std::string_view val = line.substr(colon + 1);
      size_t vs = val.find_first_not_of(" \t");
      val.remove_prefix(vs == std::string_view::npos ? val.size() : vs);
      if (iequals(key, "transfer-encoding") && icontains(val, "chunked")) c->chunked = true;
      else if (iequals(key, "content-length")) c->content_length = std::atoll(std::string(val).c_str());
      else if (iequals(key, "connection")) c->keep_alive = !icontains(val, "close") && c->keep_alive;
    }
    c->in.erase(0, end + 4);
    c->state = Conn::State::kBody;
    c->handler->on_status(status, t);
    if (!c->chunked && c->content_length == 0) {
      finish(c, c->keep_alive, t);
      return false;
    }
  }
  if (c->state != Conn::State::kBody) return true;
  if (c->chunked) {
    c->decoded.clear();
    try {
      size_t used = c->dechunk.feed(c->in, c->decoded);
      c->in.erase(0, used);
    } catch (const Error& e) {
      fail(c, e.what(), t);
      return false;
    }
    if (!c->decoded.empty()) c->handler->on_body(c->decoded, t);
    if (c->dechunk.done()) {
      finish(c, c->keep_alive, t);
      return false;
    }
    return true;
  }
  if (c->content_length >= 0) {
    size_t take = static_cast<size_t>(std::min<long long>(c->content_length - c->body_read, static_cast<long long>(c->in.size())));
    if (take > 0) c->handler->on_body(std::string_view(c->in.data(), take), t);
    c->body_read += static_cast<long long>(take);
    c->in.erase(0, take);
    if (c->body_read >= c->content_length) {
      finish(c, c->keep_alive, t);
      return false;
    }
    return true;
  }
  if (!c->in.empty()) c->handler->on_body(c->in, t);
  c->in.clear();
  return true;
}

void EpollHttpClient::finish(Conn* c, bool keep_alive, double t) {
  StreamHandler* h = c->handler;
  c->handler = nullptr;
  --num_in_flight_;
  if (keep_alive && c->in.empty() && !c->more_input) {
    c->state = Conn::State::kIdle;
    idle_.push_back(c);
  } else {
    close_conn(c);
  }
  h->on_complete(t);
}

void EpollHttpClient::fail(Conn* c, const std::string& msg, double t) {
  StreamHandler* h = c->handler;
  c->handler = nullptr;
  --num_in_flight_;
  close_conn(c);
  if (h) h->on_error(msg, t);
}

void EpollHttpClient::close_conn(Conn* c) {
  if (c->ssl) {
    SSL_free(c->ssl);  // no close_notify: the socket closes now anyway
    c->ssl = nullptr;
  }
  if (c->fd >= 0) {
    epoll_ctl(epfd_, EPOLL_CTL_DEL, c->fd, nullptr);
    ::close(c->fd);
  }
  c->fd = -1;
  c->state = Conn::State::kIdle;
  c->raw.clear();
  c->marks.clear();
  c->read_status = 0;
}

}  // namespace vireo::bench
