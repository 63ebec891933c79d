// continue_final_message (vLLM / transformers): the prompt ends inside the final assistant message,
// for /v1/chat/completions and /tokenize.
#include <gtest/gtest.h>

#include "core/error.h"
#include "server_fixture.h"
#include "template/chat_template.h"

using namespace vireo;
using namespace vireo::testing;
using nlohmann::json;

namespace {

json user(const std::string& text) { return {{"role", "user"}, {"content", text}}; }
json assistant(const std::string& text) { return {{"role", "assistant"}, {"content", text}}; }

// /tokenize of a chat body, as text (the fake tokenizer's ids < 256 are bytes).
std::string rendered(LiveServer& srv, json body) {
  auto cli = srv.client();
  auto r = post_json(cli, "/tokenize", body);
  EXPECT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  std::string s;
  for (int id : j["tokens"]) s += static_cast<char>(id);
  return s;
}

}  // namespace

TEST(ContinueFinalMessage, PromptEndsInsideTheFinalMessage) {
  LiveServer srv;
  json msgs = {user("hi"), assistant("The answer is")};
  EXPECT_EQ(rendered(srv, {{"messages", msgs}, {"continue_final_message", true}}), "<user>hi\n<assistant>The answer is");
  EXPECT_EQ(rendered(srv, {{"messages", msgs}, {"continue_final_message", true}, {"add_generation_prompt", false}}),
            "<user>hi\n<assistant>The answer is");
  EXPECT_EQ(rendered(srv, {{"messages", msgs}, {"add_generation_prompt", false}}), "<user>hi\n<assistant>The answer is\n");
  // The template keeps the trailing space, so the cut keeps it (transformers' rule).
  EXPECT_EQ(rendered(srv, {{"messages", {user("hi"), assistant("Sure, ")}}, {"continue_final_message", true}}),
            "<user>hi\n<assistant>Sure, ");

  auto cli = srv.client();
  auto r = post_json(cli, "/v1/chat/completions", {{"messages", msgs}, {"continue_final_message", true}, {"max_tokens", 3}});
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  EXPECT_EQ(j["usage"]["prompt_tokens"], std::string("<user>hi\n<assistant>The answer is").size());
  EXPECT_EQ(j["choices"][0]["message"]["content"], FakeEngine::expected_text({'s'}, 3));  // continues after "is"

  for (json bad : {json{{"messages", msgs}, {"continue_final_message", true}, {"add_generation_prompt", true}},
                   json{{"messages", {user("hi")}}, {"continue_final_message", true}}}) {
    r = post_json(cli, "/v1/chat/completions", bad);
    EXPECT_EQ(r->status, 400) << bad;
    EXPECT_EQ(json::parse(r->body)["error"]["param"], "continue_final_message") << r->body;
  }
}

TEST(ContinueFinalMessage, TemplateCutFollowsTransformers) {
  ChatTemplate trimming("{% for m in messages %}[{{ m.role }}]{{ m.content | trim }}</s>{% endfor %}", "", "");
  ChatTemplateOptions o;
  o.add_generation_prompt = false;
  o.continue_final_message = true;
  nlohmann::ordered_json msgs = {{{"role", "user"}, {"content", "q"}}, {{"role", "assistant"}, {"content", " Hel  "}}};
  EXPECT_EQ(trimming.apply(msgs, o), "[user]q</s>[assistant]Hel");  // trimmed by the template: cut after "Hel"
  // The last text part of a list content is the one continued.
  msgs[1]["content"] = nlohmann::ordered_json::array({{{"type", "text"}, {"text", "x"}}, {{"type", "text"}, {"text", "q"}}});
  ChatTemplate parts("{% for m in messages %}{% if m.content is string %}{{ m.content }}{% else %}"
                     "{% for p in m.content %}{{ p.text }}{% endfor %}{% endif %}|{% endfor %}",
                     "", "");
  EXPECT_EQ(parts.apply(msgs, o), "q|xq");  // the last "q", not the user's
  ChatTemplate dropping("{% for m in messages %}{% if m.role == 'user' %}{{ m.content }}{% endif %}{% endfor %}", "", "");
  msgs[1]["content"] = "absent";
  EXPECT_THROW(dropping.apply(msgs, o), Error);
  o.add_generation_prompt = true;
  EXPECT_THROW(trimming.apply(msgs, o), Error);
}
