// Unit tests of the Jinja interpreter: syntax errors with line numbers, runtime errors, guards
// against hostile templates, the ChatTemplate context, and a random-template robustness sweep.
// Output correctness of each Jinja feature is checked against jinja2 in template_fixture_test.cc.
#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "template/chat_template.h"
#include "template/interpreter.h"
#include "template/parser.h"

namespace {

using vireo::ChatTemplate;
using vireo::ChatTemplateOptions;
using OJson = nlohmann::ordered_json;

std::string render(const std::string& src, OJson extra = OJson::object(), OJson messages = OJson::array()) {
  ChatTemplate t(src, "<s>", "</s>");
  ChatTemplateOptions o;
  o.add_generation_prompt = false;
  o.extra_context = std::move(extra);
  return t.apply(messages, o);
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const vireo::Error& e) {
    return e.what();
  }
  return "<no error>";
}

std::string syntax_error(const std::string& src) {
  return error_of([&] { ChatTemplate t(src, "", ""); });
}

std::string render_error(const std::string& src, OJson extra = OJson::object()) {
  return error_of([&] { render(src, extra); });
}

#define EXPECT_CONTAINS(hay, needle) EXPECT_NE(std::string(hay).find(needle), std::string::npos) << (hay)

TEST(TemplateSyntax, ErrorsNameTheLine) {
  EXPECT_CONTAINS(syntax_error("line1\n{% if x %}\nabc"), "line 3");
  EXPECT_CONTAINS(syntax_error("line1\n{% if x %}\nabc"), "'endif'");
  EXPECT_CONTAINS(syntax_error("a\nb\n{{ 1 + }}"), "line 3");
  EXPECT_CONTAINS(syntax_error("{% frobnicate %}"), "line 1: unknown tag 'frobnicate'");
  EXPECT_CONTAINS(syntax_error("x\n{% if a %}{% endfor %}"), "line 2: unknown tag 'endfor'");
  EXPECT_CONTAINS(syntax_error("\n\n{{ 'abc }}"), "line 3");
  EXPECT_CONTAINS(syntax_error("{# never closed"), "comment");
  EXPECT_CONTAINS(syntax_error("a\n{{ x "), "line 2");
  EXPECT_CONTAINS(syntax_error("{{ x | nosuchfilter }}"), "no filter named 'nosuchfilter'");
  EXPECT_CONTAINS(syntax_error("{{ x is nosuchtest }}"), "no test named 'nosuchtest'");
  EXPECT_CONTAINS(syntax_error("{% break %}"), "outside of a loop");
  EXPECT_CONTAINS(syntax_error("{% for x in y %}"), "'endfor'");
  EXPECT_CONTAINS(syntax_error("{% set %}"), "expected name");
  EXPECT_CONTAINS(syntax_error("{{ f(a=1, 2) }}"), "positional argument after keyword");
  EXPECT_CONTAINS(syntax_error("{% raw %}never closed"), "raw");
  EXPECT_CONTAINS(syntax_error("{{ 1 @ 2 }}"), "unexpected char '@'");
}

TEST(TemplateSyntax, DeepNestingIsAnErrorNotACrash) {
  std::string deep(5000, '(');
  EXPECT_CONTAINS(syntax_error("{{ " + deep + "1" + std::string(5000, ')') + " }}"), "nested too deeply");
  std::string ifs;
  for (int i = 0; i < 2000; ++i) ifs += "{% if true %}";
  EXPECT_CONTAINS(syntax_error(ifs), "nested too deeply");
}

TEST(TemplateRuntime, ErrorsAreVireoErrors) {
  EXPECT_CONTAINS(render_error("{{ raise_exception('Bad roles: ' ~ 3) }}"), "Bad roles: 3");
  EXPECT_CONTAINS(render_error("{{ missing.attr }}"), "'missing' is undefined");
  EXPECT_CONTAINS(render_error("{{ missing() }}"), "'missing' is undefined");
  EXPECT_CONTAINS(render_error("{{ 'a' + 1 }}"), "can only concatenate str");
  EXPECT_CONTAINS(render_error("{{ 1 // 0 }}"), "by zero");
  EXPECT_CONTAINS(render_error("{% for x in 3 %}{% endfor %}"), "'int' object is not iterable");
  EXPECT_CONTAINS(render_error("{% set a, b = [1] %}"), "not enough values to unpack");
  EXPECT_CONTAINS(render_error("{% set l = [] %}{{ l.append(1) }}"), "unsafe");
  EXPECT_CONTAINS(render_error("{{ 3() }}"), "not callable");
  EXPECT_CONTAINS(render_error("{{ x | tojson }}"), "not JSON serializable");
}

TEST(TemplateRuntime, UndefinedIsEmptyAndFalsy) {
  EXPECT_EQ(render("[{{ nope }}]{% if nope %}T{% else %}F{% endif %}{{ nope | length }}{% for x in nope %}x{% endfor %}"),
            "[]F0");
  EXPECT_EQ(render("{{ d.missing }}|{{ d['missing'] }}|{{ d.missing is defined }}", {{"d", {{"k", 1}}}}), "||False");
  EXPECT_EQ(render("{{ l[5] }}|{{ n.attr }}", {{"l", {1}}, {"n", nullptr}}), "|");
}

TEST(TemplateGuards, RecursionRangeAndSizeLimits) {
  EXPECT_CONTAINS(render_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"), "recursion");
  EXPECT_CONTAINS(render_error("{% for i in range(1000000) %}{% endfor %}"), "Range too big");
  EXPECT_CONTAINS(render_error("{% set ns = namespace(s='xxxxxxxx') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"),
                  "too large");
  EXPECT_CONTAINS(render_error("{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}"),
                  "too large");
  EXPECT_CONTAINS(render_error("{{ 'ab' * 10000000000 }}"), "too large");
  EXPECT_CONTAINS(render_error("{{ ('x' * 1000000) | replace('', 'yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy') }}"), "too large");
}

TEST(TemplateGuards, StepAndOutputLimitsOnTheInterpreter) {
  using namespace vireo::tmpl;
  Body body = parse_template("{% for i in range(1000) %}{% for j in range(1000) %}ab{% endfor %}{% endfor %}");
  auto globals = std::make_shared<Scope>();
  install_globals(*globals);
  {
    Interpreter in(globals);
    in.max_steps = 10000;
    std::string out;
    EXPECT_CONTAINS(error_of([&] { in.render(body, out); }), "steps");
  }
  {
    Interpreter in(globals);
    in.max_output = 5000;
    std::string out;
    EXPECT_CONTAINS(error_of([&] { in.render(body, out); }), "output exceeds");
  }
  {
    Interpreter in(globals);
    std::string out;
    in.render(body, out);
    EXPECT_EQ(out.size(), 2000000u);
  }
}

TEST(ChatTemplateContext, TokensToolsAndExtraContext) {
  ChatTemplate t(
      "{{ bos_token }}|{{ eos_token }}|{{ add_generation_prompt }}|{{ tools is none }}|{{ documents is none }}|"
      "{{ enable_thinking is defined }}|{{ messages | length }}",
      "<s>", "</s>");
  ChatTemplateOptions o;
  EXPECT_EQ(t.apply(OJson::array({{{"role", "user"}, {"content", "x"}}}), o), "<s>|</s>|True|True|True|False|1");
  o.add_generation_prompt = false;
  o.tools = OJson::array({{{"type", "function"}}});
  o.extra_context = {{"enable_thinking", false}, {"bos_token", "B"}};
  EXPECT_EQ(t.apply(OJson::array(), o), "B|</s>|False|False|True|True|0");
  o.extra_context = OJson::array();
  EXPECT_THROW(t.apply(OJson::array(), o), vireo::Error);
}

TEST(ChatTemplateContext, KeyOrderIsKeptForOrderedJsonAndSortedForJson) {
  ChatTemplate t("{{ messages[0] | tojson }}{% for k in messages[0] %}|{{ k }}{% endfor %}", "", "");
  ChatTemplateOptions o;
  OJson ordered = OJson::parse(R"([{"role":"user","content":"hi","name":"n"}])");
  EXPECT_EQ(t.apply(ordered, o), R"({"role": "user", "content": "hi", "name": "n"}|role|content|name)");
  nlohmann::json sorted = nlohmann::json::parse(R"([{"role":"user","content":"hi","name":"n"}])");
  EXPECT_EQ(t.apply(sorted, o), R"({"content": "hi", "name": "n", "role": "user"}|content|name|role)");
}

TEST(ChatTemplateContext, MoveAndReuse) {
  ChatTemplate a("{% set x = 1 %}{{ x }}{{ messages | length }}", "", "");
  ChatTemplate b = std::move(a);
  ChatTemplateOptions o;
  EXPECT_EQ(b.apply(OJson::array(), o), "10");
  EXPECT_EQ(b.apply(OJson::array({1, 2}), o), "12");  // no state leaks between renders
}

TEST(TemplateValues, PythonFormatting) {
  EXPECT_EQ(render("{{ 1.0 }} {{ 1e22 }} {{ 0.000123 }} {{ 1/3 }} {{ -2.5e-10 }} {{ 12345678901234567.0 }}"),
            "1.0 1e+22 0.000123 0.3333333333333333 -2.5e-10 1.2345678901234568e+16");
  EXPECT_EQ(render("{{ x }}", {{"x", {{"a", {1, 2.0, nullptr, true, "q'\"\n"}}}}}),
            "{'a': [1, 2.0, None, True, 'q\\'\"\\n']}");
  EXPECT_EQ(render("{{ 'é😀' | length }} {{ 'é😀'[1] }} {{ 'aé'[::-1] }} {{ 'ÉCOLE' | lower }} {{ 'straße' | upper }}"),
            "2 😀 éa école STRAßE");
}

// Random templates built from Jinja fragments: each must render or throw vireo::Error, never crash.
TEST(TemplateRobustness, RandomTemplatesNeverCrash) {
  const std::vector<std::string> frags = {
      "{{", "}}", "{%", "%}", "{#", "#}", "{%-", "-%}", "{{-", "-}}", " if ", " for ", " in ", " endif ", " endfor ",
      " else ", " set ", " = ", " x ", " messages ", "[", "]", "(", ")", "{", "}", "'s'", "\"t\"", " 1 ", " 2.5 ",
      " + ", " - ", " * ", " / ", " // ", " % ", " ** ", " ~ ", " | ", " trim ", " length ", " tojson ", " join ",
      " is ", " not ", " defined ", " none ", ".", ",", ":", " and ", " or ", " loop ", " macro ", " endmacro ",
      " call ", " endcall ", " raw ", " endraw ", "\n", "  ", "text", " range(3) ", " namespace() ", " ns.a ",
      " [::-1] ", " | items ", " | map(attribute='role') ", " | selectattr('role') ", " break ", " continue "};
  std::mt19937 rng(1234);
  OJson messages = OJson::parse(R"([{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}])");
  int rendered = 0, rejected = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string src;
    int n = 1 + rng() % 24;
    for (int i = 0; i < n; ++i) src += frags[rng() % frags.size()];
    try {
      ChatTemplate t(src, "<s>", "</s>");
      ChatTemplateOptions o;
      t.apply(messages, o);
      ++rendered;
    } catch (const vireo::Error&) {
      ++rejected;
    }
  }
  EXPECT_GT(rendered, 0);
  EXPECT_GT(rejected, 0);
}

}  // namespace
