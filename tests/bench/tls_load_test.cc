// bench serve against an https:// server: the epoll client's TLS (handshake on a non-blocking socket, records
// read until OpenSSL has none left, keep-alive reuse), the server's certificate checked or, with --insecure,
// not. The server: cpp-httplib's SSLServer with the committed self-signed certificate (tests/fixtures/tls,
// CN and SAN localhost / 127.0.0.1) streaming an OpenAI-style SSE answer.
#include <gtest/gtest.h>
#include <httplib.h>

#include <string>
#include <thread>
#include <vector>

#include "bench/load_runner.h"

using namespace vireo::bench;

namespace {

const std::string kDir = std::string(VIREO_SOURCE_DIR) + "/tests/fixtures/tls/";

class TlsSseServer {
 public:
  TlsSseServer() : svr_((kDir + "cert.pem").c_str(), (kDir + "key.pem").c_str()) {
    svr_.Post("/v1/completions", [](const httplib::Request&, httplib::Response& res) {
      res.set_chunked_content_provider("text/event-stream", [](size_t, httplib::DataSink& sink) {
        std::string big(20000, 'x');  // a chunk longer than one TLS record (16 KB)
        for (int i = 0; i < 4; ++i) {
          const std::string text = i == 2 ? big : "t" + std::to_string(i);
          const std::string ev = "data: {\"choices\":[{\"index\":0,\"text\":\"" + text + "\"}]}\n\n";
          sink.write(ev.data(), ev.size());
        }
        const std::string usage = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":4}}\n\n";
        sink.write(usage.data(), usage.size());
        sink.write("data: [DONE]\n\n", 14);
        sink.done();
        return true;
      });
    });
    port_ = svr_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { svr_.listen_after_bind(); });
  }
  ~TlsSseServer() {
    svr_.stop();
    thread_.join();
  }
  int port() const { return port_; }

 private:
  httplib::SSLServer svr_;
  int port_ = 0;
  std::thread thread_;
};

std::vector<SampleRequest> prompts(int n) {
  std::vector<SampleRequest> v;
  for (int i = 0; i < n; ++i) v.push_back({"prompt " + std::to_string(i), 3, 4});
  return v;
}

std::vector<RequestResult> run(int port, const ClientTls& tls, int n) {
  LoadOptions opt;
  opt.host = "127.0.0.1";
  opt.port = port;
  opt.tls = tls;
  opt.model = "stub";
  opt.max_concurrency = 8;
  double duration = 0;
  return run_load(prompts(n), opt, &duration, nullptr);
}

TEST(BenchTls, StreamsOverHttpsWithTheServersCertificateChecked) {
  TlsSseServer server;
  ClientTls tls;
  tls.enabled = true;
  tls.ca_file = kDir + "cert.pem";
  const auto results = run(server.port(), tls, 40);  // 40 requests on 8 connections: keep-alive reuse
  ASSERT_EQ(results.size(), 40u);
  for (const auto& r : results) {
    EXPECT_TRUE(r.success) << r.error;
    EXPECT_EQ(r.output_tokens, 4);
    EXPECT_EQ(r.generated_text.size(), 2 + 2 + 20000 + 2u);
  }
}

TEST(BenchTls, UntrustedCertificateFailsUnlessInsecure) {
  TlsSseServer server;
  ClientTls tls;
  tls.enabled = true;
  tls.ca_file = "";  // the system CAs: none trusts the server's self-signed certificate
  for (const auto& r : run(server.port(), tls, 4)) {
    EXPECT_FALSE(r.success);
    EXPECT_NE(r.error.find("certificate"), std::string::npos) << r.error;
  }
  tls.verify = false;  // --insecure
  for (const auto& r : run(server.port(), tls, 4)) EXPECT_TRUE(r.success) << r.error;
}

TEST(BenchTls, HttpsBaseUrl) {
  Endpoint e = parse_base_url("https://example.org/proxy/");
  EXPECT_TRUE(e.tls);
  EXPECT_EQ(e.host, "example.org");
  EXPECT_EQ(e.port, 443);
  EXPECT_EQ(e.path_prefix, "/proxy");
  e = parse_base_url("https://127.0.0.1:8443");
  EXPECT_TRUE(e.tls);
  EXPECT_EQ(e.port, 8443);
  e = parse_base_url("http://localhost");
  EXPECT_FALSE(e.tls);
  EXPECT_EQ(e.port, 80);
}

}  // namespace
