// CORS as vLLM's CORSMiddleware answers it: preflights before routing, Allow-Origin on responses to
// requests with an allowed Origin (streams and errors too), lists echo the origin.
#include <gtest/gtest.h>

#include "server_fixture.h"

using namespace vireo;
using namespace vireo::testing;

namespace {

httplib::Headers preflight(const std::string& origin, const std::string& method = "POST") {
  return {{"Origin", origin}, {"Access-Control-Request-Method", method},
          {"Access-Control-Request-Headers", "content-type, authorization"}};
}

TEST(Cors, DefaultAllowsEveryOrigin) {
  LiveServer s;
  auto c = s.client();
  auto pre = c.Options("/v1/chat/completions", preflight("http://ui.example"));
  ASSERT_TRUE(pre);
  EXPECT_EQ(pre->status, 200);
  EXPECT_EQ(pre->get_header_value("Access-Control-Allow-Origin"), "*");
  EXPECT_EQ(pre->get_header_value("Access-Control-Allow-Headers"), "content-type, authorization");
  EXPECT_NE(pre->get_header_value("Access-Control-Allow-Methods").find("POST"), std::string::npos);

  auto ok = c.Get("/v1/models", {{"Origin", "http://ui.example"}});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(ok->get_header_value("Access-Control-Allow-Origin"), "*");
  auto missing = c.Get("/v1/nope", {{"Origin", "http://ui.example"}});  // errors carry it too
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(missing->get_header_value("Access-Control-Allow-Origin"), "*");
  httplib::Headers h{{"Origin", "http://ui.example"}};
  auto gen = c.Post("/v1/completions", h, R"({"prompt":"hi","max_tokens":2,"stream":true})", "application/json");
  ASSERT_TRUE(gen);
  EXPECT_EQ(gen->status, 200);
  EXPECT_EQ(gen->get_header_value("Access-Control-Allow-Origin"), "*");
  auto plain = c.Get("/v1/models");  // no Origin: no CORS headers
  ASSERT_TRUE(plain);
  EXPECT_FALSE(plain->has_header("Access-Control-Allow-Origin"));
}

TEST(Cors, OriginListEchoesAllowedOriginsAndRefusesOthers) {
  server::ServerOptions o;
  o.cors.allowed_origins = {"http://a.example"};
  o.cors.allow_credentials = true;
  LiveServer s(o);
  auto c = s.client();
  auto pre = c.Options("/v1/completions", preflight("http://a.example"));
  ASSERT_TRUE(pre);
  EXPECT_EQ(pre->status, 200);
  EXPECT_EQ(pre->get_header_value("Access-Control-Allow-Origin"), "http://a.example");
  EXPECT_EQ(pre->get_header_value("Access-Control-Allow-Credentials"), "true");
  auto bad = c.Options("/v1/completions", preflight("http://evil.example"));
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(bad->body, "Disallowed CORS origin");
  auto get = c.Get("/v1/models", {{"Origin", "http://evil.example"}});
  ASSERT_TRUE(get);
  EXPECT_EQ(get->status, 200);  // served; the browser withholds it without the header
  EXPECT_FALSE(get->has_header("Access-Control-Allow-Origin"));
}

}  // namespace
