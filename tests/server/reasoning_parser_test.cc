// --reasoning-parser: qwen3, deepseek_r1 and openai_gptoss (harmony), whole text and every split into up to three pieces.
#include <gtest/gtest.h>

#include "core/error.h"
#include "server/reasoning_parser.h"
#include "split_feed.h"

using namespace vireo;
using namespace vireo::server;

namespace {

struct Case {
  std::string text, reasoning, content;
};

void check_parser(const std::string& name, const std::vector<Case>& cases) {
  for (const auto& c : cases) {
    ReasoningDelta whole = make_reasoning_parser(name)->parse_all(c.text);
    EXPECT_EQ(whole.reasoning, c.reasoning) << name << ": " << c.text;
    EXPECT_EQ(whole.content, c.content) << name << ": " << c.text;
    vireo::testing::for_each_split(c.text, [&](const std::vector<std::string_view>& pieces) {
      auto p = make_reasoning_parser(name);
      ReasoningDelta sum;
      for (auto piece : pieces) {
        ReasoningDelta d = p->feed(piece);
        // Released text never carries a tag, whole or in part, while more may follow.
        EXPECT_EQ(d.reasoning.find("</think>"), std::string::npos) << c.text;
        sum.append(d);
      }
      sum.append(p->finish());
      EXPECT_EQ(sum.reasoning, c.reasoning) << name << ": " << c.text << " split " << pieces[0].size() << "/" << pieces[1].size();
      EXPECT_EQ(sum.content, c.content) << name << ": " << c.text << " split " << pieces[0].size() << "/" << pieces[1].size();
    });
  }
}

}  // namespace

TEST(ReasoningParser, Qwen3) {
  check_parser("qwen3", {
                            {"<think>\nLet me see.\n</think>\n\nThe answer is 4.", "\nLet me see.\n", "\n\nThe answer is 4."},
                            {"<think></think>x", "", "x"},
                            {"plain answer, no thinking", "", "plain answer, no thinking"},
                            {"<think>cut off by max_tokens", "cut off by max_tokens", ""},
                            {"<think>a</thin", "a</thin", ""},
                            {"<thin", "", "<thin"},
                            {"", "", ""},
                            {"x</think>y", "", "x</think>y"},  // no opener: qwen3 has no reasoning here
                            {"<think>a</think>b</think>c<think>", "a", "b</think>c<think>"},
                        });
}

TEST(ReasoningParser, DeepSeekR1) {
  check_parser("deepseek_r1", {
                                  {"Let me see.</think>The answer is 4.", "Let me see.", "The answer is 4."},
                                  {"<think>Let me see.</think>The answer is 4.", "Let me see.", "The answer is 4."},
                                  {"no end tag at all", "no end tag at all", ""},
                                  {"</think>only content", "", "only content"},
                                  {"<thi", "<thi", ""},
                                  {"a</thi", "a</thi", ""},
                                  {"", "", ""},
                                  {"r</think>c</think>", "r", "c</think>"},
                              });
}

TEST(ReasoningParser, SeedOss) {
  check_parser("seed_oss", {
                               {"<seed:think>Plan.</seed:think>Answer.", "Plan.", "Answer."},
                               {"Plan.</seed:think>Answer.", "Plan.", "Answer."},
                               {"no end tag", "no end tag", ""},
                               {"", "", ""},
                           });
}

TEST(ReasoningParser, OpenAiGptOssHarmony) {
  check_parser("openai_gptoss",
               {
                   {"<|channel|>analysis<|message|>User asks 2+2.<|end|><|start|>assistant<|channel|>final<|message|>4",
                    "User asks 2+2.", "4"},
                   {"<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>final<|message|>b<|return|>", "a",
                    "b"},
                   {"<|channel|>final<|message|>only the answer", "", "only the answer"},
                   {"<|channel|>analysis<|message|>cut by max_tokens", "cut by max_tokens", ""},
                   {"<|channel|>analysis<|message|>x<|en", "x<|en", ""},  // a marker never completed stays text
                   {"<|channel|>commentary<|message|>note<|end|>", "", "note"},
                   // A tool call (a recipient in the header) is not content.
                   {"<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\":1}<|call|>", "", ""},
                   {"plain text, no harmony", "", "plain text, no harmony"},
                   // The first message of the output addressed to a tool (after the prompt's <|start|>assistant).
                   {" to=functions.get_weather<|channel|>commentary json<|message|>{\"city\":\"Paris\"}<|call|>", "", ""},
                   {" tomorrow it rains", "", " tomorrow it rains"},
                   {"plain <|channel|>x", "", "plain <|channel|>x"},
                   {"<|chan", "", "<|chan"},
                   {"", "", ""},
               });
}

TEST(ReasoningParser, RegistryByName) {
  EXPECT_EQ(reasoning_parser_names(),
            (std::vector<std::string>{"deepseek_r1", "deepseek_v3", "glm45", "openai_gptoss", "qwen3", "seed_oss"}));
  // glm45 reads GLM-4.5's output as qwen3 does.
  for (const char* text : {"<think>plan</think>answer", "no thinking", "<think>cut off"}) {
    ReasoningDelta g = make_reasoning_parser("glm45")->parse_all(text), q = make_reasoning_parser("qwen3")->parse_all(text);
    EXPECT_EQ(g.reasoning, q.reasoning) << text;
    EXPECT_EQ(g.content, q.content) << text;
  }
  EXPECT_THROW(make_reasoning_parser("granite"), Error);
}
