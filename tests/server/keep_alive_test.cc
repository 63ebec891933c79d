// HTTP/1.1 keep-alive: a client may send many requests on one connection, one after another, as uvicorn
// allows (cpp-httplib's default closes the connection after the fifth).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server_fixture.h"

using namespace vireo::testing;

namespace {

// Reads one response (head + Content-Length body) from fd into `head`; false on close or timeout.
bool read_response(int fd, std::string& pending, std::string& head) {
  char buf[4096];
  for (;;) {
    const size_t head_end = pending.find("\r\n\r\n");
    if (head_end != std::string::npos) {
      const size_t cl = pending.find("Content-Length: ");
      const size_t body = cl != std::string::npos && cl < head_end ? std::stoul(pending.substr(cl + 16)) : 0;
      if (pending.size() >= head_end + 4 + body) {
        head = pending.substr(0, head_end);
        pending.erase(0, head_end + 4 + body);
        return true;
      }
    }
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return false;
    pending.append(buf, static_cast<size_t>(n));
  }
}

}  // namespace

TEST(KeepAlive, ManyRequestsOnOneConnection) {
  LiveServer srv;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(srv.port()));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string pending, head;
  const std::string get = "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::string body = R"({"prompt":"hi","max_tokens":1})";
  const std::string post = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                           std::to_string(body.size()) + "\r\n\r\n" + body;
  for (int i = 0; i < 24; ++i) {
    SCOPED_TRACE(i);
    const std::string& req = i % 2 ? post : get;
    ASSERT_EQ(send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
    ASSERT_TRUE(read_response(fd, pending, head)) << "connection closed or timed out";
    EXPECT_EQ(head.substr(9, 3), "200") << head;
    EXPECT_EQ(head.find("Connection: close"), std::string::npos) << head;
  }
  close(fd);
}
