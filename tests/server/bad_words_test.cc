// vLLM's bad_words through the server: tokenized as vLLM's update_from_tokenizer does (left-stripped, as
// is and with a leading space when that is a word-initial token of the same length) and handed to the
// engine (malformed values: bad_input_test.cc).
#include <gtest/gtest.h>

#include "server_fixture.h"

using namespace vireo;
using namespace vireo::testing;
using nlohmann::json;

TEST(BadWords, TokenizedIntoTheEngineParams) {
  LiveServer srv;
  auto cli = srv.client();
  // Byte tokenizer: "ab" -> [97, 98] (" ab" is 3 tokens: not kept), "  c" -> "c" -> [99].
  for (const char* path : {"/v1/completions", "/v1/chat/completions"}) {
    SCOPED_TRACE(path);
    json body = {{"max_tokens", 2}, {"bad_words", {"ab", "  c", ""}}};
    if (std::string(path) == "/v1/completions") body["prompt"] = "hi";
    else body["messages"] = json::array({{{"role", "user"}, {"content", "hi"}}});
    auto r = post_json(cli, path, body);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
    const SamplingParams p = srv.engine().last_params();
    EXPECT_EQ(p.bad_words_token_ids, (std::vector<std::vector<int32_t>>{{97, 98}, {99}}));
  }
  auto none = post_json(cli, "/v1/completions", {{"prompt", "hi"}, {"max_tokens", 1}, {"bad_words", nullptr}});
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 200);
  EXPECT_TRUE(srv.engine().last_params().bad_words_token_ids.empty());
}
