#include "bench/epoll_http_client.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "bench/chunked_decoder.h"
#include "core/error.h"

namespace vireo::bench {

struct EpollHttpClient::Conn {
  int fd = -1;
  enum class State { kIdle, kConnecting, kWriting, kHeaders, kBody } state = State::kIdle;
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
  std::string raw;              // read in phase 1 of a poll, not parsed yet
  double raw_ts = 0;            // when `raw` was read
  int read_status = 0;          // phase 1 saw: 0 = open, 1 = EOF, -1 = error
  int read_errno = 0;
};

namespace {

std::string lower(std::string s) {
  for (auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

}  // namespace

EpollHttpClient::EpollHttpClient(const std::string& host, int port) : t0_(std::chrono::steady_clock::now()) {
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
  epfd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epfd_ < 0) throw Error(std::string("bench: epoll_create1 failed: ") + std::strerror(errno));
}

EpollHttpClient::~EpollHttpClient() {
  for (auto& c : conns_) {
    if (c->fd >= 0) ::close(c->fd);
  }
  if (epfd_ >= 0) ::close(epfd_);
}

double EpollHttpClient::now() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
}

void EpollHttpClient::open_conn(Conn* c) {
  c->fd = ::socket(addr_.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (c->fd < 0) throw Error(std::string("bench: socket() failed: ") + std::strerror(errno));
  int one = 1;
  setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  int rc = ::connect(c->fd, reinterpret_cast<const sockaddr*>(&addr_), addr_len_);
  c->state = (rc == 0) ? Conn::State::kWriting : Conn::State::kConnecting;
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
}

void EpollHttpClient::send_request(Conn* c, const HttpRequest& req, StreamHandler* h, bool reused) {
  c->req = req;
  c->handler = h;
  c->reused = reused;
  c->got_bytes = false;
  c->raw.clear();
  c->read_status = 0;
  c->in.clear();
  c->decoded.clear();
  c->chunked = false;
  c->keep_alive = true;
  c->content_length = -1;
  c->body_read = 0;
  c->dechunk = ChunkedDecoder();
  c->deadline = req.timeout_s > 0 ? now() + req.timeout_s : 0;
  c->out.clear();
  c->out += req.method + " " + req.path + " HTTP/1.1\r\nHost: " + host_header_ + "\r\n";
  c->out += "Accept: */*\r\nConnection: keep-alive\r\n";
  for (auto& [k, v] : req.headers) c->out += k + ": " + v + "\r\n";
  if (req.method != "GET" || !req.body.empty()) {
    c->out += "Content-Type: " + req.content_type + "\r\nContent-Length: " + std::to_string(req.body.size()) + "\r\n";
  }
  c->out += "\r\n";
  c->out += req.body;
  c->out_off = 0;
  if (c->state == Conn::State::kIdle) {
    c->state = Conn::State::kWriting;
    on_writable(c);  // try to send right away: usually the whole request fits the socket buffer
  }
}

void EpollHttpClient::poll(int timeout_ms) {
  epoll_event events[256];
  int n = epoll_wait(epfd_, events, 256, timeout_ms);
  if (n < 0 && errno != EINTR) throw Error(std::string("bench: epoll_wait failed: ") + std::strerror(errno));
  for (int i = 0; i < n; ++i) {
    auto* c = static_cast<Conn*>(events[i].data.ptr);
    if (c->fd >= 0 && c->state != Conn::State::kIdle && c->state != Conn::State::kConnecting &&
        (events[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
      drain(c);
  }
  for (int i = 0; i < n; ++i) handle_event(static_cast<Conn*>(events[i].data.ptr), events[i].events);
  // Reap closed connections (closed ones have fd < 0 and are not in idle_).
  conns_.erase(std::remove_if(conns_.begin(), conns_.end(), [](auto& c) { return c->fd < 0; }), conns_.end());
  check_timeouts(now());
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
  if (c->state == Conn::State::kConnecting) {
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0 || (events & EPOLLERR)) {
      fail(c, std::string("connect failed: ") + std::strerror(err ? err : ECONNREFUSED), now());
      return;
    }
    if (!(events & EPOLLOUT)) return;
    c->state = Conn::State::kWriting;
  }
  if (c->state == Conn::State::kWriting && (events & EPOLLOUT)) on_writable(c);
  if (c->fd >= 0 && (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) {
    if (c->raw.empty() && c->read_status == 0) drain(c);  // not drained in phase 1 (was connecting)
    on_readable(c);
  }
}

void EpollHttpClient::on_writable(Conn* c) {
  while (c->out_off < c->out.size()) {
    ssize_t n = ::send(c->fd, c->out.data() + c->out_off, c->out.size() - c->out_off, MSG_NOSIGNAL);
    if (n > 0) {
      c->out_off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      watch(c, true);  // EPOLLOUT resumes us
      return;
    }
    fail(c, std::string("send failed: ") + std::strerror(errno), now());
    return;
  }
  c->state = Conn::State::kHeaders;
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

// Phase 1 of a poll: read whatever is ready on `c` and stamp it, before any parsing, so a
// response's timestamp does not include the time spent parsing the other responses of the batch.
void EpollHttpClient::drain(Conn* c) {
  char buf[65536];
  c->read_status = 0;
  while (true) {
    ssize_t n = ::recv(c->fd, buf, sizeof(buf), 0);
    if (n > 0) {
      if (c->raw.empty()) c->raw_ts = now();
      c->raw.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    c->read_status = n == 0 ? 1 : -1;
    c->read_errno = errno;
    if (c->raw.empty()) c->raw_ts = now();
    return;
  }
}

// Phase 2: parse what drain() read, then act on EOF / error.
void EpollHttpClient::on_readable(Conn* c) {
  if (!c->raw.empty()) {
    c->got_bytes = true;
    c->in.append(c->raw);
    c->raw.clear();
    if (!parse_input(c, c->raw_ts)) {
      c->read_status = 0;
      return;
    }
  }
  int status = c->read_status;
  c->read_status = 0;
  if (status == 0 || c->fd < 0) return;
  double t = now();
  // EOF or error.
  if (c->state == Conn::State::kBody && !c->chunked && c->content_length < 0) {
    finish(c, false, t);  // body delimited by close
    return;
  }
  if (c->reused && !c->got_bytes && c->state != Conn::State::kBody) {
    // A stale keep-alive connection: retry once on a fresh one.
    HttpRequest req = std::move(c->req);
    StreamHandler* h = c->handler;
    epoll_ctl(epfd_, EPOLL_CTL_DEL, c->fd, nullptr);
    ::close(c->fd);
    c->fd = -1;
    c->state = Conn::State::kIdle;
    open_conn(c);
    send_request(c, req, h, false);
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
    std::string head = c->in.substr(0, end);
    c->in.erase(0, end + 4);
    size_t line_end = head.find("\r\n");
    std::string status_line = head.substr(0, line_end);
    int status = 0;
    if (status_line.rfind("HTTP/1.", 0) != 0 || status_line.size() < 12) {
      fail(c, "malformed status line '" + status_line + "'", t);
      return false;
    }
    status = std::atoi(status_line.c_str() + 9);
    c->keep_alive = status_line.rfind("HTTP/1.1", 0) == 0;
    size_t pos = line_end == std::string::npos ? head.size() : line_end + 2;
    while (pos < head.size()) {
      size_t e = head.find("\r\n", pos);
      if (e == std::string::npos) e = head.size();
      std::string line = head.substr(pos, e - pos);
      pos = e + 2;
      size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string key = lower(line.substr(0, colon));
      std::string val = line.substr(colon + 1);
      val.erase(0, val.find_first_not_of(" \t"));
      std::string lval = lower(val);
      if (key == "transfer-encoding" && lval.find("chunked") != std::string::npos) c->chunked = true;
      else if (key == "content-length") c->content_length = std::atoll(val.c_str());
      else if (key == "connection") c->keep_alive = lval.find("close") == std::string::npos && c->keep_alive;
    }
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
  if (keep_alive && c->in.empty()) {
    c->state = Conn::State::kIdle;
    c->req = HttpRequest();
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
  if (c->fd >= 0) {
    epoll_ctl(epfd_, EPOLL_CTL_DEL, c->fd, nullptr);
    ::close(c->fd);
  }
  c->fd = -1;
  c->state = Conn::State::kIdle;
}

}  // namespace vireo::bench
