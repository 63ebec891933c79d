// GET /tokenizer_info (vLLM's --enable-tokenizer-info-endpoint): 404 without the flag, as vLLM registers no route;
// with it, the tokenizer's config (here: none, the fake engine has no tokenizer folder) and its class.
#include <gtest/gtest.h>

#include "server_fixture.h"

namespace vireo::testing {
namespace {

TEST(TokenizerInfo, OnlyWithTheFlag) {
  LiveServer off;
  auto c = off.client();
  auto r = c.Get("/tokenizer_info");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(nlohmann::json::parse(r->body)["error"]["code"], 404);

  server::ServerOptions o;
  o.enable_tokenizer_info_endpoint = true;
  LiveServer on(o);
  auto c2 = on.client();
  auto r2 = c2.Get("/tokenizer_info");
  ASSERT_TRUE(r2);
  EXPECT_EQ(r2->status, 200) << r2->body;
  const auto j = nlohmann::json::parse(r2->body);
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["tokenizer_class"], "PreTrainedTokenizerFast");
}

}  // namespace
}  // namespace vireo::testing
