// HTTP-level input cpp-httplib would mishandle (request_framing.h): bad or oversized
// Content-Length, compressed bodies, no body, malformed request lines. Each gets an OpenAI error
// at once (well under the 30 s read timeout), and the connection is closed whenever an unread
// body could follow.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include "server_fixture.h"

using namespace vireo;
using namespace vireo::testing;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

struct RawReply {
  int status = -1;
  std::string head;  // status line and headers
  json body;
  bool closed = false;  // the server closed the connection after the response
  double seconds = 0;
};

// Sends `request` as is and reads one response; waits up to 3 s for the server to close after it.
RawReply exchange(int port, const std::string& request) {
  RawReply r;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return r;
  timeval tv{3, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  auto start = std::chrono::steady_clock::now();
  (void)!send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string in;
  char buf[4096];
  size_t body_end = std::string::npos;
  for (;;) {
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n == 0) r.closed = true;
    if (n <= 0) break;
    in.append(buf, static_cast<size_t>(n));
    size_t head_end = in.find("\r\n\r\n");
    if (body_end == std::string::npos && head_end != std::string::npos) {
      size_t cl = in.find("Content-Length: ");
      if (cl != std::string::npos && cl < head_end) body_end = head_end + 4 + std::stoul(in.substr(cl + 16));
    }
    if (body_end != std::string::npos && in.size() >= body_end && r.seconds == 0)
      r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  close(fd);
  size_t head_end = in.find("\r\n\r\n");
  if (in.size() < 12 || head_end == std::string::npos) return r;
  r.status = std::stoi(in.substr(9, 3));
  r.head = in.substr(0, head_end);
  r.body = json::parse(in.substr(head_end + 4, body_end - head_end - 4), nullptr, false);
  return r;
}

std::string post(const std::string& headers, const std::string& body = R"({"prompt":"hello","max_tokens":2})") {
  return "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + headers + "\r\n" + body;
}

void expect_error(const RawReply& r, int status, const std::string& type, const std::string& message_part) {
  EXPECT_EQ(r.status, status) << r.head;
  ASSERT_TRUE(r.body.contains("error")) << r.body;
  EXPECT_EQ(r.body["error"]["type"], type);
  EXPECT_EQ(r.body["error"]["code"], status);
  EXPECT_TRUE(r.body["error"]["param"].is_null());
  EXPECT_NE(r.body["error"]["message"].get<std::string>().find(message_part), std::string::npos) << r.body;
  EXPECT_LT(r.seconds, 2.0) << "answered only after " << r.seconds << " s";
}

void expect_closed(const RawReply& r) {
  EXPECT_NE(r.head.find("Connection: close"), std::string::npos) << r.head;
  EXPECT_TRUE(r.closed);
}

}  // namespace

TEST(HttpFraming, InvalidContentLengthIs400AtOnceAndCloses) {
  LiveServer srv;
  for (const char* cl : {"-5", "abc", "5x", "1e3", "+5"}) {
    SCOPED_TRACE(cl);
    auto r = exchange(srv.port(), post(std::string("Content-Length: ") + cl + "\r\n"));
    expect_error(r, 400, "BadRequestError", "Content-Length");
    expect_closed(r);
  }
  auto r = exchange(srv.port(), post("Content-Length: 5\r\nContent-Length: 6\r\n"));
  expect_error(r, 400, "BadRequestError", "'5', '6'");
  expect_closed(r);
}

TEST(HttpFraming, DeclaredLengthOverTheLimitIs413AtOnceAndCloses) {
  server::ServerOptions opts;
  opts.max_body_bytes = 64 * 1024;
  LiveServer srv(opts);
  for (const char* cl : {"99999999999999999999", "1000000000000", "65537"}) {
    SCOPED_TRACE(cl);
    auto r = exchange(srv.port(), post(std::string("Content-Length: ") + cl + "\r\n"));
    expect_error(r, 413, "RequestTooLargeError", cl);
    expect_closed(r);
  }
  // Waiting for 100 Continue: the 413 comes instead, so the body is never sent.
  auto r = exchange(srv.port(), post("Content-Length: 1000000\r\nExpect: 100-continue\r\n", ""));
  expect_error(r, 413, "RequestTooLargeError", "1000000");
  EXPECT_EQ(r.head.find("100 Continue"), std::string::npos) << r.head;
  // A client that uploads the whole body before reading still gets the 413, not a reset.
  auto cli = srv.client();
  auto big = post_json(cli, "/v1/completions", {{"prompt", std::string(4 << 20, 'a')}});
  ASSERT_TRUE(big) << httplib::to_string(big.error());
  EXPECT_EQ(big->status, 413);
}

TEST(HttpFraming, UnsupportedTransferEncodingIs400) {
  LiveServer srv;
  auto r = exchange(srv.port(), post("Transfer-Encoding: gzip\r\n", "abc"));
  expect_error(r, 400, "BadRequestError", "Transfer-Encoding");
  expect_closed(r);
  r = exchange(srv.port(), post("Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", "0\r\n\r\n"));
  expect_error(r, 400, "BadRequestError", "both");
  // A malformed chunked body: where the next request starts is unknown, so the connection closes.
  r = exchange(srv.port(), post("Transfer-Encoding: chunked\r\n", "zz\r\nabc\r\n"));
  expect_error(r, 400, "BadRequestError", "could not be read");
  expect_closed(r);
}

TEST(HttpFraming, CompressedBodiesAre415) {
  LiveServer srv;
  const std::string body = R"({"prompt":"hello","max_tokens":2})";
  const std::string cl = "Content-Length: " + std::to_string(body.size()) + "\r\n";
  for (const char* enc : {"br", "gzip", "deflate", "zstd"}) {
    SCOPED_TRACE(enc);
    auto r = exchange(srv.port(), post(cl + "Content-Encoding: " + enc + "\r\n", body));
    expect_error(r, 415, "UnsupportedMediaTypeError", "Content-Encoding");
    expect_closed(r);
  }
  auto r = exchange(srv.port(), post(cl + "Content-Encoding: identity\r\nConnection: close\r\n", body));
  EXPECT_EQ(r.status, 200) << r.body;
}

TEST(HttpFraming, MultipartIs415BeforeTheBodyIsRead) {
  LiveServer srv;
  auto r = exchange(srv.port(), "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; "
                                "boundary=\r\nContent-Length: 5\r\n\r\nhello");
  expect_error(r, 415, "UnsupportedMediaTypeError", "application/json");
  expect_closed(r);
}

TEST(HttpFraming, PostWithoutBodyIs400WithASpecificMessage) {
  LiveServer srv;
  auto r = exchange(srv.port(), post("Connection: close\r\n", ""));
  expect_error(r, 400, "BadRequestError", "no body");
}

TEST(HttpFraming, MalformedRequestLineAndHeaders) {
  LiveServer srv;
  for (const char* line : {"get /health HTTP/1.1", "GET /health", "GET /health HTTP/2.0", "BREW /health HTTP/1.1"}) {
    SCOPED_TRACE(line);
    auto r = exchange(srv.port(), std::string(line) + "\r\nHost: x\r\n\r\n");
    expect_error(r, 400, "BadRequestError", "request line");
    expect_closed(r);
  }
  auto r = exchange(srv.port(), "GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(9000, 'a') + "\r\n\r\n");
  expect_error(r, 400, "BadRequestError", "headers");
}

TEST(HttpFraming, UriTooLongIs414) {
  LiveServer srv;
  auto r = exchange(srv.port(), "GET /" + std::string(9000, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n");
  expect_error(r, 414, "URITooLongError", "URI Too Long");
  expect_closed(r);
}

// A request answered before its body is read (404 here) must not leave the body to be parsed as
// the next request: the connection is closed, so a pipelined request gets no garbled answer.
TEST(HttpFraming, EarlyAnswerWithAnUnreadBodyCloses) {
  LiveServer srv;
  const std::string body = R"({"prompt":"a"})";
  auto r = exchange(srv.port(), "POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body +
                                    "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  expect_error(r, 404, "NotFoundError", "/v1/embeddings");
  expect_closed(r);
}
