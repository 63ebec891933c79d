// tool_choice "required": the grammar's array of calls, at least one, and at most one when the request
// sets parallel_tool_calls false (vLLM's maxItems 1).
#include <gtest/gtest.h>

#include "server/tool_choice.h"
#include "structured/grammar_matcher.h"

using namespace vireo;
using server::Json;

namespace {

bool matches(const std::shared_ptr<const structured::Grammar>& g, const std::string& text) {
  static auto vocab = std::make_shared<const structured::VocabIndex>(std::vector<std::string>{});
  structured::GrammarMatcher m(g, vocab, {});
  return m.accept_bytes(text) && m.can_terminate();
}

const Json kTools = Json::parse(R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
  "properties": {"a": {"type": "integer"}}, "required": ["a"]}}}])");
const std::string kOne = R"([{"name": "f", "parameters": {"a": 1}}])";
const std::string kTwo = R"([{"name": "f", "parameters": {"a": 1}}, {"name": "f", "parameters": {"a": 2}}])";

}  // namespace

TEST(ToolChoice, RequiredAllowsParallelCallsUnlessTurnedOff) {
  Json body = {{"tools", kTools}, {"tool_choice", "required"}};
  server::ToolChoice c = server::parse_tool_choice(body);
  EXPECT_TRUE(c.parallel);
  auto g = server::tool_choice_grammar(c, kTools);
  EXPECT_TRUE(matches(g, kOne));
  EXPECT_TRUE(matches(g, kTwo));
  EXPECT_FALSE(matches(g, "[]"));
  body["parallel_tool_calls"] = false;
  c = server::parse_tool_choice(body);
  EXPECT_FALSE(c.parallel);
  g = server::tool_choice_grammar(c, kTools);
  EXPECT_TRUE(matches(g, kOne));
  EXPECT_FALSE(matches(g, kTwo));
}
