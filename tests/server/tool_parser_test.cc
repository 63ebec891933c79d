// --tool-call-parser: hermes, llama3_json, openai (GPT-OSS's harmony calls), deepseek_v3 / v31, qwen3_coder and
// glm45, whole text and every split
// into up to three pieces;
// the combined reasoning + tool pipeline; tool_choice rules.
#include <gtest/gtest.h>

#include "core/error.h"
#include "server/chat_output_parser.h"
#include "server/openai_errors.h"
#include "server/tool_choice.h"
#include "server/tool_arg_values.h"
#include "server/tool_parser.h"
#include "split_feed.h"

using namespace vireo;
using namespace vireo::server;

namespace {

struct Case {
  std::string text, content;
  std::vector<ToolCall> calls;
};

std::string show(const std::vector<ToolCall>& calls) {
  std::string s;
  for (const auto& c : calls) s += c.name + c.arguments + ";";
  return s;
}

void check_parser(const std::string& name, const std::vector<Case>& cases) {
  for (const auto& c : cases) {
    ToolDelta whole = make_tool_parser(name)->parse_all(c.text);
    EXPECT_EQ(whole.content, c.content) << name << ": " << c.text;
    EXPECT_EQ(show(whole.calls), show(c.calls)) << name << ": " << c.text;
    vireo::testing::for_each_split(c.text, [&](const std::vector<std::string_view>& pieces) {
      auto p = make_tool_parser(name);
      ToolDelta sum;
      for (auto piece : pieces) sum.append(p->feed(piece));
      sum.append(p->finish());
      std::string where = name + ": " + c.text + " split " + std::to_string(pieces[0].size()) + "/" + std::to_string(pieces[1].size());
      EXPECT_EQ(sum.content, c.content) << where;
      EXPECT_EQ(show(sum.calls), show(c.calls)) << where;
    });
  }
}

// check() on the whole text parsed at once and on every split of it fed piece by piece.
template <typename Check>
void check_every_split(const ChatParsing& parsing, const std::string& text, Check check) {
  check(parsing.make()->parse_all(text));
  vireo::testing::for_each_split(text, [&](const std::vector<std::string_view>& pieces) {
    auto p = parsing.make();
    ChatDelta sum;
    for (auto piece : pieces) sum.append(p->feed(piece));
    sum.append(p->finish());
    check(sum);
  });
}

const std::string kWeather = R"({"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}})";

}  // namespace

TEST(ToolParser, Hermes) {
  ToolCall weather{"get_weather", R"({"city":"Paris","unit":"c"})"};  // key order kept
  check_parser("hermes", {
      {"Let me check.\n<tool_call>\n" + kWeather + "\n</tool_call>", "Let me check.\n", {weather}},
      {"<tool_call>\n" + kWeather + "\n</tool_call>\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
       "\n", {weather, {"f", "{}"}}},
      {"no calls here <tool", "no calls here <tool", {}},
      // Malformed JSON or no name: the block stays text, the other calls still count.
      {"<tool_call>\n{\"name\": oops}\n</tool_call>", "<tool_call>\n{\"name\": oops}\n</tool_call>", {}},
      {"<tool_call>{\"arguments\": {}}</tool_call>x<tool_call>{\"name\":\"g\"}</tool_call>",
       "<tool_call>{\"arguments\": {}}</tool_call>x", {{"g", "{}"}}},
      // Unclosed at the end (max_tokens): parsed if it can be, else given back.
      {"<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1, 2]}}\n", "", {{"f", R"({"a":[1,2]})"}}},
      {"<tool_call>\n{\"name\": \"f\", \"argu", "<tool_call>\n{\"name\": \"f\", \"argu", {}},
      // Arguments already a JSON string are kept as written.
      {"<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}</tool_call>", "", {{"f", "{\"a\": 1}"}}},
      {"", "", {}},
  });
}

TEST(ToolParser, Llama3Json) {
  check_parser("llama3_json", {
      {R"({"name": "get_weather", "parameters": {"city": "Paris"}})", "", {{"get_weather", R"({"city":"Paris"})"}}},
      {"<|python_tag|>{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"arguments\": {\"s\": \"}{\\\"\"}}",
       "", {{"a", "{}"}, {"b", R"({"s":"}{\""})"}}},
      {" \n{\"name\": \"f\", \"parameters\": {}}\n", "", {{"f", "{}"}}},
      {"Hello there {\"name\": \"f\"}", "Hello there {\"name\": \"f\"}", {}},
      {"{not json", "{not json", {}},
      {"{\"name\": \"f\"} and then text", "{\"name\": \"f\"} and then text", {}},
      {"{\"a\": 1}", "{\"a\": 1}", {}},
      {"<|python", "<|python", {}},
      {"  ", "  ", {}},
  });
}

TEST(ToolParser, OpenAiHarmonyHandOff) {
  check_parser("openai", {
                             {"<|call_to|>functions.get_weather<|args|>{\"city\": \"Paris\"}<|call|>", "",
                              {{"get_weather", "{\"city\": \"Paris\"}"}}},
                             {"Let me check.<|call_to|>functions.f<|args|> {} <|call|>done", "Let me check.done",
                              {{"f", "{}"}}},
                             {"<|call_to|>functions.cut<|args|>{\"a\": 1", "", {{"cut", "{\"a\": 1"}}},
                             {"no calls <|call", "no calls <|call", {}},
                         });
}

// GPT-OSS end to end through the two harmony parsers: reasoning, then a call to a function (the header's
// recipient), its arguments as written; without a tool parser the call message is dropped.
TEST(ChatOutputParser, HarmonyReasoningThenToolCall) {
  const std::string text =
      "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant to=functions.get_weather"
      "<|channel|>commentary json<|message|>{\"city\": \"Paris\"}<|call|>";
  auto check = [&](const ChatDelta& d) {
    EXPECT_EQ(d.reasoning, "Need the weather.");
    EXPECT_EQ(d.content, "");
    ASSERT_EQ(d.calls.size(), 1u);
    EXPECT_EQ(d.calls[0].name, "get_weather");
    EXPECT_EQ(d.calls[0].arguments, "{\"city\": \"Paris\"}");
  };
  ChatParsing parsing{"openai_gptoss", "openai"};
  check_every_split(parsing, text, check);
  ChatDelta no_tools = ChatParsing{"openai_gptoss", ""}.make()->parse_all(text);
  EXPECT_EQ(no_tools.reasoning, "Need the weather.");
  EXPECT_EQ(no_tools.content, "");
  EXPECT_TRUE(no_tools.calls.empty());
}

// qwen3_coder (Qwen3-Coder, Qwen3.5 / 3.6): XML-style parameters, typed by the request's tool schemas as
// vLLM's Qwen3CoderToolParser does; without schemas every value stays a string.
TEST(ToolParser, Qwen3CoderUntyped) {
  check_parser("qwen3_coder", {
      {"Checking.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
       "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
       "Checking.\n", {{"get_weather", R"({"city":"Paris","days":"3"})"}}},
      // Two functions in one block, a parameter without its closing tag, a multi-line value.
      {"<tool_call>\n<function=a>\n<parameter=x>\nline 1\nline 2\n<parameter=y>\nv\n</function>\n"
       "<function=b>\n</function>\n</tool_call>",
       "", {{"a", R"({"x":"line 1\nline 2","y":"v"})"}, {"b", "{}"}}},
      // Cut off inside the block (max_tokens): what is there is parsed.
      {"<tool_call>\n<function=f>\n<parameter=q>\nhel", "", {{"f", R"({"q":"hel"})"}}},
      // No function inside: the block is given back as text.
      {"<tool_call>\n{\"name\": \"f\"}\n</tool_call>", "<tool_call>\n{\"name\": \"f\"}\n</tool_call>", {}},
      {"plain <tool", "plain <tool", {}},
  });
}

TEST(ToolParser, Qwen3CoderTypesParametersBySchema) {
  const Json tools = Json::parse(R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
      "properties": {"s": {"type": "string"}, "i": {"type": "integer"}, "n": {"type": "number"},
                     "whole": {"type": "number"}, "big": {"type": "number"}, "b": {"type": "boolean"}, "o": {"type": "object"},
                     "a": {"type": "array"}, "bad_i": {"type": "integer"}, "nul": {"type": "integer"},
                     "any": {"type": ["integer", "null"]}, "py": {"description": "no type: a string"}}}}}])");
  const std::string text =
      "<tool_call>\n<function=f>\n<parameter=s>\n42\n</parameter>\n<parameter=i>\n-17\n</parameter>\n"
      "<parameter=n>\n2.5\n</parameter>\n<parameter=whole>\n3.0\n</parameter>\n<parameter=big>\n1e300\n</parameter>\n<parameter=b>\nTrue\n</parameter>\n"
      "<parameter=o>\n{\"k\": [1, 2]}\n</parameter>\n<parameter=a>\n[\"x\", 1]\n</parameter>\n"
      "<parameter=bad_i>\nmany\n</parameter>\n<parameter=nul>\nNULL\n</parameter>\n"
      "<parameter=any>\n7\n</parameter>\n<parameter=py>\n8\n</parameter>\n<parameter=extra>\n9\n</parameter>\n"
      "</function>\n</tool_call>";
  ToolDelta d = make_tool_parser("qwen3_coder", tools)->parse_all(text);
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(Json::parse(d.calls[0].arguments),
            Json::parse(R"({"s": "42", "i": -17, "n": 2.5, "whole": 3, "big": 1e300, "b": true, "o": {"k": [1, 2]}, "a": ["x", 1],
                            "bad_i": "many", "nul": null, "any": 7, "py": "8", "extra": "9"})"));
  // Another function of the list, or none at all: strings.
  EXPECT_EQ(make_tool_parser("qwen3_coder", tools)->parse_all("<tool_call><function=g><parameter=i>1</parameter></function></tool_call>").calls[0].arguments,
            R"({"i":"1"})");
}

// glm45 (GLM-4.5 / 4.6 / 4.7): name line, <arg_key> / <arg_value> pairs; string-typed arguments stay text,
// the others are read as JSON, escaped JSON, a Python literal or text, as vLLM's Glm4MoeModelToolParser.
TEST(ToolParser, Glm45) {
  check_parser("glm45", {
      {"Let me look.<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
       "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>",
       "Let me look.", {{"get_weather", R"({"city":"Paris","days":3})"}}},
      {"<tool_call>get_time</tool_call><tool_call>f\n<arg_key>o</arg_key><arg_value>{\"a\": [1, true]}</arg_value>"
       "<arg_key>p</arg_key><arg_value>['x', None]</arg_value><arg_key>t</arg_key><arg_value>True</arg_value>"
       "</tool_call>",
       "", {{"get_time", "{}"}, {"f", R"({"o":{"a":[1,true]},"p":["x",null],"t":true})"}}},
      {"<tool_call>\n<arg_key>k</arg_key></tool_call>", "<tool_call>\n<arg_key>k</arg_key></tool_call>", {}},
      {"<tool_call>cut\n<arg_key>k</arg_key><arg_value>v", "", {{"cut", "{}"}}},
  });
  const Json tools = Json::parse(R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
      "properties": {"zip": {"type": "string"}, "n": {"type": "integer"}}}}}])");
  ToolDelta d = make_tool_parser("glm45", tools)->parse_all(
      "<tool_call>f\n<arg_key>zip</arg_key>\n<arg_value>01234</arg_value>\n<arg_key>n</arg_key>\n<arg_value>7</arg_value>\n"
      "</tool_call>");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].arguments, R"({"zip":"01234","n":7})");  // a string-typed "01234" is not read as a number
}

// deepseek_v3 / deepseek_v31: one section of calls after the content, V3's fenced JSON or V3.1's bare JSON.
TEST(ToolParser, DeepSeek) {
  const std::string b = "<｜tool▁calls▁begin｜>", e = "<｜tool▁calls▁end｜>", cb = "<｜tool▁call▁begin｜>",
                    ce = "<｜tool▁call▁end｜>", sep = "<｜tool▁sep｜>";
  const std::vector<Case> cases = {
      // V3 (the chat template's form): type, sep, name, a fenced JSON block.
      {"Let me check." + b + cb + "function" + sep + "get_weather\n```json\n{\"city\": \"Paris\"}\n```" + ce + "\n" + cb +
           "function" + sep + "get_time\n```json\n{}\n```" + ce + e,
       "Let me check.", {{"get_weather", R"({"city": "Paris"})"}, {"get_time", "{}"}}},
      // V3.1: name, sep, JSON.
      {b + cb + "get_weather" + sep + R"({"city":"Rome"})" + ce + e, "", {{"get_weather", R"({"city":"Rome"})"}}},
      // Cut off inside the section (max_tokens): the calls that parse count.
      {b + cb + "f" + sep + "{\"a\": 1}" + ce + cb + "g" + sep + "{}", "", {{"f", "{\"a\": 1}"}, {"g", "{}"}}},
      // A call that does not parse gives the whole section back as content.
      {"x" + b + cb + "f" + sep + "{oops" + ce + e, "x" + b + cb + "f" + sep + "{oops" + ce + e, {}},
      {"no calls <｜tool", "no calls <｜tool", {}},
      {"", "", {}},
  };
  check_parser("deepseek_v3", cases);
  check_parser("deepseek_v31", cases);
}

// granite: the whole answer a JSON list of calls, after an optional <|tool_call|> or <tool_call>.
TEST(ToolParser, Granite) {
  check_parser("granite", {
      {R"(<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "f", "arguments": {}}])", "",
       {{"get_weather", R"({"city":"Paris"})"}, {"f", "{}"}}},
      {R"( [{"name": "g"}])", "", {{"g", "{}"}}},
      {R"(<tool_call>[{"name": "h", "arguments": {"a": 1}}])", "", {{"h", R"({"a":1})"}}},
      {R"([{"arguments": {}}])", R"([{"arguments": {}}])", {}},
      {"[1, 2", "[1, 2", {}},
      {"Plain answer [not a call]", "Plain answer [not a call]", {}},
      {"<|tool", "<|tool", {}},
  });
}

// hunyuan_a13b: one <tool_calls> block holding a JSON list of calls.
TEST(ToolParser, Hunyuan) {
  check_parser("hunyuan_a13b", {
      {R"(Let me check.<tool_calls>[{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "f", "arguments": {}}]</tool_calls>)",
       "Let me check.", {{"get_weather", R"({"city":"Paris"})"}, {"f", "{}"}}},
      {R"(<tool_calls>[{"name": "g", "arguments": "{\"a\": 1}"}, {"name": "skipped"}])", "", {{"g", R"({"a": 1})"}}},
      {"<tool_calls>not json</tool_calls>", "<tool_calls>not json</tool_calls>", {}},
      {"plain <tool_c", "plain <tool_c", {}},
  });
}

// seed_oss: qwen3_coder's functions inside <seed:tool_call> blocks, typed by the schema the same way.
TEST(ToolParser, SeedOss) {
  check_parser("seed_oss", {
      {"Checking.<seed:tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n"
       "</seed:tool_call>",
       "Checking.", {{"get_weather", R"({"city":"Paris"})"}}},
      {"<tool_call><function=f></function></tool_call>", "<tool_call><function=f></function></tool_call>", {}},
      {"<seed:tool_call>no function</seed:tool_call>", "<seed:tool_call>no function</seed:tool_call>", {}},
  });
  const Json tools = Json::parse(R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
      "properties": {"n": {"type": "integer"}}}}}])");
  ToolDelta d = make_tool_parser("seed_oss", tools)->parse_all("<seed:tool_call><function=f><parameter=n>7</parameter></function></seed:tool_call>");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].arguments, R"({"n":7})");
}

// ast.literal_eval's literals as json.dumps writes them, and what it refuses.
TEST(ToolArgValues, PythonLiterals) {
  auto lit = [](const std::string& s) { return python_literal(s); };
  EXPECT_EQ(*lit(" [1, 'a', (2.5, None), {'k': True, 3: \"q\\n\"}] "),
            Json::parse(R"([1, "a", [2.5, null], {"k": true, "3": "q\n"}])"));
  EXPECT_EQ(*lit("-3"), Json(-3));
  EXPECT_EQ(*lit("1."), Json(1.0));
  EXPECT_EQ(*lit(".5"), Json(0.5));
  EXPECT_EQ(*lit("1e3"), Json(1000.0));
  EXPECT_EQ(*lit("[]"), Json::array());
  EXPECT_EQ(*lit("[1, 2,]"), Json::parse("[1, 2]"));
  for (const char* bad : {"true", "null", "Paris", "[1, 2", "{'a' 1}", "'open", "", "1 2", "None x"})
    EXPECT_FALSE(lit(bad).has_value()) << bad;
}

TEST(ToolParser, RegistryByName) {
  EXPECT_EQ(tool_parser_names(), (std::vector<std::string>{"deepseek_v3", "deepseek_v31", "glm45", "granite", "hermes",
                                                           "hunyuan_a13b", "llama3_json", "openai", "qwen3_coder", "seed_oss"}));
  EXPECT_THROW(make_tool_parser("mistral"), Error);
}

TEST(ChatOutputParser, ReasoningFirstThenToolCalls) {
  ChatParsing parsing{"qwen3", "hermes"};
  std::string text = "<think>I need the weather. <tool_call> is how I call.</think>\n\n<tool_call>\n" + kWeather +
                     "\n</tool_call>";
  auto check = [&](const ChatDelta& d) {
    EXPECT_EQ(d.reasoning, "I need the weather. <tool_call> is how I call.");
    EXPECT_EQ(d.content, "\n\n");
    ASSERT_EQ(d.calls.size(), 1u);
    EXPECT_EQ(d.calls[0].name, "get_weather");
  };
  check_every_split(parsing, text, check);
  // No parsers: everything is content, untouched.
  ChatDelta plain = ChatParsing{}.make()->parse_all(text);
  EXPECT_EQ(plain.content, text);
  EXPECT_TRUE(plain.reasoning.empty() && plain.calls.empty());
}

TEST(ToolChoice, DefaultsAndRefusals) {
  using J = Json;
  J tools = J::array({{{"type", "function"}, {"function", {{"name", "f"}}}}});
  EXPECT_EQ(parse_tool_choice(J::object()).mode, "none");
  EXPECT_EQ(parse_tool_choice({{"tools", tools}}).mode, "auto");
  EXPECT_EQ(parse_tool_choice({{"tools", J::array()}}).mode, "none");
  EXPECT_EQ(parse_tool_choice({{"tools", tools}, {"tool_choice", "none"}}).mode, "none");
  EXPECT_EQ(parse_tool_choice({{"tools", tools}, {"tool_choice", nullptr}}).mode, "auto");
  EXPECT_EQ(parse_tool_choice({{"tools", tools}, {"tool_choice", "auto"}}).mode, "auto");
  EXPECT_EQ(parse_tool_choice({{"tools", tools}, {"tool_choice", "required"}}).mode, "required");
  const ToolChoice named = parse_tool_choice({{"tools", tools}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "f"}}}}}});
  EXPECT_EQ(named.mode, "named");
  EXPECT_EQ(named.function, "f");
  auto refused = [&](J body, const std::string& words) {
    try {
      parse_tool_choice(body);
      ADD_FAILURE() << body.dump();
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status, 400);
      EXPECT_EQ(e.param, "tool_choice");
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  refused({{"tools", tools}, {"tool_choice", {{"type", "function"}}}}, "Invalid value");
  refused({{"tools", tools}, {"tool_choice", "always"}}, "Invalid value");
  refused({{"tools", tools}, {"tool_choice", 5}}, "Invalid value");
  refused({{"tools", tools}, {"tool_choice", J::array()}}, "Invalid value");
  refused({{"tool_choice", "auto"}}, "`tools` must be set");
}

TEST(ToolChoice, ForcedChoicesCompileGrammars) {
  using J = Json;
  J tools = J::array({{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", {{"type", "object"},
                         {"properties", {{"x", {{"$ref", "#/$defs/X"}}}}}, {"$defs", {{"X", {{"type", "integer"}}}}}}}}}},
                      {{"type", "function"}, {"function", {{"name", "g"}}}}});
  EXPECT_EQ(tool_choice_grammar({"auto", ""}, tools), nullptr);
  EXPECT_NE(tool_choice_grammar({"required", ""}, tools), nullptr);
  EXPECT_NE(tool_choice_grammar({"named", "g"}, tools), nullptr);
  EXPECT_NE(tool_choice_grammar({"named", "f"}, tools), nullptr);
  try {
    tool_choice_grammar({"named", "h"}, tools);
    ADD_FAILURE();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param, "tool_choice");
    EXPECT_NE(std::string(e.what()).find("has not been passed"), std::string::npos);
  }
  J bad = J::array({{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", {{"type", "object"},
                       {"properties", {{"x", {{"type", "string"}, {"not", {{"const", "a"}}}}}}}}}}}}});
  EXPECT_THROW(tool_choice_grammar({"required", ""}, bad), ApiError);
}

TEST(ForcedToolParser, NamedAndRequired) {
  ChatParsing named;
  named.forced_tool_choice = "named";
  named.forced_function = "get_weather";
  ChatDelta d = named.make()->parse_all(R"({"city": "Paris"})");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0], (ToolCall{"get_weather", R"({"city": "Paris"})"}));
  EXPECT_EQ(named.finish_reason(true, "stop"), "stop");
  ChatParsing required;
  required.forced_tool_choice = "required";
  d = required.make()->parse_all(R"([{"name": "a", "parameters": {"x": 1}}, {"name": "b", "parameters": {}}])");
  ASSERT_EQ(d.calls.size(), 2u);
  EXPECT_EQ(d.calls[0], (ToolCall{"a", R"({"x":1})"}));
  EXPECT_EQ(d.calls[1], (ToolCall{"b", "{}"}));
  EXPECT_EQ(required.finish_reason(true, "stop"), "tool_calls");
  d = required.make()->parse_all(R"([{"name": "a", "param)");  // cut short by max_tokens
  EXPECT_TRUE(d.calls.empty());
  EXPECT_EQ(d.content, R"([{"name": "a", "param)");
}

TEST(ToolChoice, AutoNeedsTheServerFlags) {
  ChatRequest req;
  req.tool_choice = "auto";
  req.tools = Json::array({Json::object()});
  ServerOptions opts;
  EXPECT_THROW(chat_parsing_for(opts, req), ApiError);
  opts.tool_call_parser = "hermes";
  EXPECT_THROW(chat_parsing_for(opts, req), ApiError);  // --enable-auto-tool-choice too
  opts.enable_auto_tool_choice = true;
  EXPECT_EQ(chat_parsing_for(opts, req).tool_parser, "hermes");
  req.tool_choice = "none";
  EXPECT_FALSE(chat_parsing_for(opts, req).active());
  opts.reasoning_parser = "qwen3";
  EXPECT_EQ(chat_parsing_for(opts, req).reasoning_parser, "qwen3");
  EXPECT_EQ(chat_parsing_for(opts, req).tool_parser, "");
}

// deepseek_v3 reasoning: R1's parser when the request turns thinking on, else the text is all content.
TEST(ChatParsing, DeepSeekV3ReasoningFollowsTheThinkingKwarg) {
  ServerOptions opts;
  opts.reasoning_parser = "deepseek_v3";
  ChatRequest req;
  EXPECT_EQ(chat_parsing_for(opts, req).reasoning_parser, "");
  for (const char* kw : {R"({"thinking": true})", R"({"enable_thinking": true})", R"({"thinking": "yes"})", R"({"thinking": 1})"}) {
    req.chat_template_kwargs = Json::parse(kw);
    EXPECT_EQ(chat_parsing_for(opts, req).reasoning_parser, "deepseek_r1") << kw;
  }
  for (const char* kw : {R"({"thinking": false})", R"({"thinking": null})", R"({"thinking": ""})", R"({"thinking": 0})"}) {
    req.chat_template_kwargs = Json::parse(kw);
    EXPECT_EQ(chat_parsing_for(opts, req).reasoning_parser, "") << kw;
  }
  req.chat_template_kwargs = Json::parse(R"({"thinking": true})");
  ChatDelta d = chat_parsing_for(opts, req).make()->parse_all("plan</think>answer");  // the template opened <think>
  EXPECT_EQ(d.reasoning, "plan");
  EXPECT_EQ(d.content, "answer");
}
