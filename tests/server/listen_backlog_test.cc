// The listening socket's accept queue holds a benchmark's burst of connections. cpp-httplib listens
// with a backlog of 5; past it the kernel drops SYNs (retried after 1, 3, 7 s) or resets connections,
// which on the H200 gave 512 concurrent clients a P99 TTFT of 14-28 s and 55 failed requests.
// Here the server is bound but accepts nothing, so every connect that completes sits in the queue.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <vector>

#include "server/api_server.h"

namespace vireo {
namespace {

int somaxconn() {
  std::ifstream f("/proc/sys/net/core/somaxconn");
  int v = 128;
  f >> v;
  return v;
}

TEST(ListenBacklog, BurstOfConnectionsQueuesWithoutAccept) {
  server::ServerOptions opts;
  opts.host = "127.0.0.1";
  opts.port = 0;
  server::ApiServer srv(opts);
  const int port = srv.bind();  // listening, but run() (the accept loop) never starts
  ASSERT_GT(port, 0);

  const int n = std::min(200, somaxconn());
  std::vector<int> fds;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int i = 0; i < n; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    (void)!connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);  // EINPROGRESS
    fds.push_back(fd);
  }
  // A connect completes once the handshake has put it in the accept queue; with a backlog of 5 all
  // but ~6 stay pending (their SYNs dropped) for the whole wait.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(800);
  int established = 0;
  for (int fd : fds) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{fd, POLLOUT, 0};
    if (poll(&p, 1, static_cast<int>(std::max<int64_t>(0, left.count()))) == 1) {
      int err = 0;
      socklen_t len = sizeof err;
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err == 0) ++established;
    }
  }
  for (int fd : fds) close(fd);
  EXPECT_GE(established, n - 1) << "of " << n << " connections (somaxconn " << somaxconn() << ")";
  srv.stop();
}

// Streams write one small chunk a token: with Nagle's algorithm on, each chunk after the first waited for
// the client's delayed ACK (up to 40 ms; H200: one client's median TTFT 44 ms, TPOT 0.31 ms, tokens in
// bursts). The listening socket has TCP_NODELAY and the connections it accepts inherit it.
TEST(ListenBacklog, ConnectionsHaveNoDelay) {
  server::ServerOptions opts;
  opts.host = "127.0.0.1";
  opts.port = 0;
  server::ApiServer srv(opts);
  const int port = srv.bind();
  ASSERT_GT(port, 0);
  int on = 0;
  socklen_t len = sizeof on;
  ASSERT_EQ(getsockopt(srv.listen_fd(), IPPROTO_TCP, TCP_NODELAY, &on, &len), 0);
  EXPECT_NE(on, 0);
  int c = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(c, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  const int s = accept(srv.listen_fd(), nullptr, nullptr);  // run() never started: the test accepts
  ASSERT_GE(s, 0);
  on = 0;
  len = sizeof on;
  ASSERT_EQ(getsockopt(s, IPPROTO_TCP, TCP_NODELAY, &on, &len), 0);
  EXPECT_NE(on, 0) << "the accepted connection has Nagle's algorithm on";
  close(s);
  close(c);
  srv.stop();
}

}  // namespace
}  // namespace vireo
