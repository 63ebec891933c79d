// Starts an ApiServer on a free loopback port with a FakeEngine, in-process.
#pragma once
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "fake_engine.h"
#include "server/api_server.h"

namespace vireo::testing {

class LiveServer {
 public:
  explicit LiveServer(server::ServerOptions opts = {}, FakeEngineOptions eopts = {}, bool load_engine = true) {
    opts.host = "127.0.0.1";
    opts.port = 0;
    if (opts.shutdown_timeout_s == 30.0) opts.shutdown_timeout_s = 2.0;
    server_ = std::make_unique<server::ApiServer>(opts);
    port_ = server_->bind();
    thread_ = std::thread([this] { server_->run(); });
    engine_ = std::make_shared<FakeEngine>(eopts);
    if (load_engine) server_->set_engine(engine_);
  }
  ~LiveServer() {
    server_->stop();
    if (thread_.joinable()) thread_.join();
    engine_->shutdown(std::chrono::milliseconds(0));
  }
  void load() { server_->set_engine(engine_); }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(30, 0);
    return c;
  }
  int port() const { return port_; }
  FakeEngine& engine() { return *engine_; }
  server::ApiServer& server() { return *server_; }

 private:
  std::unique_ptr<server::ApiServer> server_;
  std::shared_ptr<FakeEngine> engine_;
  std::thread thread_;
  int port_ = 0;
};

inline httplib::Result post_json(httplib::Client& c, const std::string& path, const nlohmann::json& body) {
  return c.Post(path.c_str(), body.dump(), "application/json");
}

// Parses "data: ..." SSE events; returns the JSON chunks and whether [DONE] came last.
inline std::vector<nlohmann::json> parse_sse(const std::string& body, bool* done = nullptr) {
  std::vector<nlohmann::json> out;
  if (done) *done = false;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    size_t end = body.find("\n\n", pos);
    std::string data = body.substr(pos + 6, end - pos - 6);
    pos = end;
    if (data == "[DONE]") {
      if (done) *done = true;
      continue;
    }
    out.push_back(nlohmann::json::parse(data));
  }
  return out;
}

struct NamedEvent {
  std::string name;  // the SSE "event:" line
  nlohmann::json data;
};

// "event: <type>\ndata: <json>\n\n" blocks, as the Responses and Messages APIs stream (no [DONE]); each
// event's data names its own type.
inline std::vector<NamedEvent> parse_named_events(const std::string& body) {
  std::vector<NamedEvent> out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) break;
    std::string block = body.substr(pos, end - pos);
    pos = end + 2;
    EXPECT_EQ(block.rfind("event: ", 0), 0u) << block;
    size_t nl = block.find('\n');
    NamedEvent e{block.substr(7, nl - 7), nlohmann::json::parse(block.substr(nl + 7))};
    EXPECT_EQ(e.data["type"], e.name);
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace vireo::testing
