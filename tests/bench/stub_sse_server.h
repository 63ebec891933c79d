// Test-only: an instant OpenAI-style SSE server on one epoll thread. Every POST gets, in one write,
// a chunked text/event-stream answer of `num_tokens` completion chunks, a usage chunk and [DONE].
// The first token's text is "T" + the steady-clock time (ns, 19 digits) taken right before the
// send() of that answer, so a test can tell how long the client took to see it. The answer is
// made once; only those digits are rewritten per request, so the server does no work between
// the timestamp and the write.
#pragma once
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>

class StubSseServer {
 public:
  explicit StubSseServer(int num_tokens) : num_tokens_(num_tokens) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    ::listen(listen_fd_, 1024);
    socklen_t len = sizeof(a);
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    body_ = make_body();
    thread_ = std::thread([this] { loop(); });
  }
  ~StubSseServer() {
    stop_ = true;
    thread_.join();
    for (auto& [fd, buf] : conns_) ::close(fd);
    ::close(listen_fd_);
  }
  int port() const { return port_; }
  int num_requests() const { return num_requests_.load(); }

 private:
  std::string make_body() {
    std::string events = chunk("data: {\"choices\":[{\"index\":0,\"text\":\"T" + std::string(19, '0') + "\"}]}\n\n");
    for (int i = 1; i < num_tokens_; ++i) events += chunk("data: {\"choices\":[{\"index\":0,\"text\":\"t" + std::to_string(i) + "\"}]}\n\n");
    events += chunk("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":" + std::to_string(num_tokens_) + "}}\n\n");
    events += chunk("data: [DONE]\n\n");
    events += "0\r\n\r\n";
    std::string head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
    stamp_at_ = head.size() + events.find("\"T") + 2;
    return head + events;
  }
  void stamp_body() {
    long long ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
    for (int i = 18; i >= 0; --i, ns /= 10) body_[stamp_at_ + static_cast<size_t>(i)] = static_cast<char>('0' + ns % 10);
  }
  static std::string chunk(const std::string& s) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%zx\r\n", s.size());
    return buf + s + "\r\n";
  }
  void loop() {
    int ep = epoll_create1(0);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = listen_fd_;
    epoll_ctl(ep, EPOLL_CTL_ADD, listen_fd_, &ev);
    epoll_event events[256];
    char buf[65536];
    while (!stop_) {
      int n = epoll_wait(ep, events, 256, 20);
      for (int i = 0; i < n; ++i) {
        int fd = events[i].data.fd;
        if (fd == listen_fd_) {
          int c;
          while ((c = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK)) >= 0) {
            int one = 1;
            setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
            epoll_event e{};
            e.events = EPOLLIN;
            e.data.fd = c;
            epoll_ctl(ep, EPOLL_CTL_ADD, c, &e);
            conns_[c];
          }
          continue;
        }
        std::string& in = conns_[fd];
        ssize_t r;
        bool closed = false;
        while ((r = ::recv(fd, buf, sizeof(buf), 0)) > 0) in.append(buf, static_cast<size_t>(r));
        if (r == 0) closed = true;
        // Answer every complete request (headers + Content-Length body) in the buffer.
        while (true) {
          size_t h = in.find("\r\n\r\n");
          if (h == std::string::npos) break;
          size_t cl = 0;
          size_t p = in.find("Content-Length: ");
          if (p != std::string::npos && p < h) cl = std::strtoul(in.c_str() + p + 16, nullptr, 10);
          if (in.size() < h + 4 + cl) break;
          in.erase(0, h + 4 + cl);
          ++num_requests_;
          // Blocking-ish write: loopback buffers hold the small answer.
          stamp_body();
          size_t off = 0;
          while (off < body_.size()) {
            ssize_t w = ::send(fd, body_.data() + off, body_.size() - off, MSG_NOSIGNAL);
            if (w > 0) off += static_cast<size_t>(w);
            else if (w < 0 && errno != EAGAIN) break;
          }
        }
        if (closed) {
          epoll_ctl(ep, EPOLL_CTL_DEL, fd, nullptr);
          ::close(fd);
          conns_.erase(fd);
        }
      }
    }
    ::close(ep);
  }

  int num_tokens_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::string body_;
  size_t stamp_at_ = 0;  // where the 19 timestamp digits are in body_
  std::atomic<bool> stop_{false};
  std::atomic<int> num_requests_{0};
  std::map<int, std::string> conns_;
  std::thread thread_;
};
