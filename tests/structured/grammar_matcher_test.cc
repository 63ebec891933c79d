// The matcher over raw bytes: what each supported schema keyword lets through and what it stops.
#include <gtest/gtest.h>

#include "structured/grammar_matcher.h"
#include "structured/json_schema_compiler.h"
#include "structured/regex_compiler.h"
#include "structured/structured_output.h"

namespace vireo::structured {
namespace {

using Js = nlohmann::ordered_json;

std::shared_ptr<const VocabIndex> empty_vocab() {
  static auto v = std::make_shared<const VocabIndex>(std::vector<std::string>{});
  return v;
}

// Whether `text` is a complete output of the grammar (every byte accepted, and it may end there).
bool matches(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  GrammarMatcher m(g, empty_vocab(), {});
  return m.accept_bytes(text) && m.can_terminate();
}

// Whether `text` is accepted as a prefix (the output may continue).
bool prefix_ok(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  GrammarMatcher m(g, empty_vocab(), {});
  return m.accept_bytes(text);
}

std::shared_ptr<const Grammar> schema(const char* text) {
  return std::make_shared<const Grammar>(compile_json_schema(Js::parse(text)));
}

TEST(GrammarMatcher, JsonObjectAcceptsAnyObject) {
  auto g = compile_structured_output({StructuredOutputSpec::Kind::kJsonObject, {}, {}});
  for (const char* ok : {"{}", "{ }", R"({"a":1})", R"({"a": [1, 2.5, -0.5e+10, "x", null, true, false, {"b": {}}]})",
                         "{\n  \"k\": \"v\"\n}", R"({"esc": "\"\\\/\b\f\n\r\t\u00e9"})", "{\"u\": \"h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80\"}",
                         R"({"n": 0, "m": -0, "e": 1E5, "f": 0.125})"})
    EXPECT_TRUE(matches(g, ok)) << ok;
  for (const char* bad : {"[]", "1", "\"s\"", "{", "{a:1}", R"({"a":01})", R"({"a":1,})", R"({"a" 1})", "{} ",
                          R"({"a":.5})", R"({"a":1.})", R"({"a":"\x"})", "{\"a\":\"\x01\"}", "{\"a\":\"\xC0\x80\"}",
                          "{\"a\":\"\xED\xA0\x80\"}", R"({"a":tru})", R"({"a":"\u12G4"})"})
    EXPECT_FALSE(matches(g, bad)) << bad;
}

TEST(GrammarMatcher, WhitespaceIsBounded) {
  auto g = compile_structured_output({StructuredOutputSpec::Kind::kJsonObject, {}, {}});
  EXPECT_TRUE(prefix_ok(g, "{" + std::string(16, ' ')));
  EXPECT_FALSE(prefix_ok(g, "{" + std::string(17, ' ')));
  EXPECT_TRUE(matches(g, "{\"a\"" + std::string(16, '\n') + ":1}"));
}

TEST(GrammarMatcher, PropertiesInOrderRequiredAndOptional) {
  auto g = schema(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},"c":{"type":"boolean"}},
                      "required":["a","c"]})");
  EXPECT_TRUE(matches(g, R"({"a":1,"b":"x","c":true})"));
  EXPECT_TRUE(matches(g, R"({"a": -12, "c": false})"));
  EXPECT_FALSE(matches(g, R"({"a":1})"));                     // c required
  EXPECT_FALSE(matches(g, R"({"c":true,"a":1})"));            // schema order
  EXPECT_FALSE(matches(g, R"({"a":1,"c":true,"d":1})"));      // no additional properties
  EXPECT_FALSE(matches(g, R"({"a":1.5,"c":true})"));          // integer
  EXPECT_FALSE(matches(g, R"({"a":1,"b":2,"c":true})"));
}

TEST(GrammarMatcher, AdditionalProperties) {
  auto any = schema(R"({"type":"object"})");
  EXPECT_TRUE(matches(any, R"({"x":[1],"y":{}})"));
  auto typed = schema(R"({"type":"object","properties":{"a":{"type":"null"}},"additionalProperties":{"type":"number"}})");
  EXPECT_TRUE(matches(typed, R"({"a":null,"z":2.5,"w":-1})"));
  EXPECT_TRUE(matches(typed, R"({"z":2.5})"));
  EXPECT_FALSE(matches(typed, R"({"a":null,"z":"s"})"));
  auto closed = schema(R"({"type":"object","additionalProperties":false})");
  EXPECT_TRUE(matches(closed, "{}"));
  EXPECT_FALSE(matches(closed, R"({"a":1})"));
}

TEST(GrammarMatcher, ArraysItemsPrefixItemsBounds) {
  auto g = schema(R"({"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":3})");
  EXPECT_FALSE(matches(g, "[1]"));
  EXPECT_TRUE(matches(g, "[1,2]"));
  EXPECT_TRUE(matches(g, "[1, 2, 3]"));
  EXPECT_FALSE(matches(g, "[1,2,3,4]"));
  EXPECT_FALSE(matches(g, "[1,\"a\"]"));
  auto open = schema(R"({"type":"array","items":{"type":"string"}})");
  EXPECT_TRUE(matches(open, "[]"));
  EXPECT_TRUE(matches(open, R"(["a","b","c","d"])"));
  auto tuple = schema(R"({"type":"array","prefixItems":[{"type":"string"},{"type":"number"}],"items":false})");
  EXPECT_TRUE(matches(tuple, R"(["a",1])"));
  EXPECT_TRUE(matches(tuple, R"(["a"])"));
  EXPECT_FALSE(matches(tuple, R"(["a",1,2])"));
  EXPECT_FALSE(matches(tuple, R"([1,"a"])"));
}

TEST(GrammarMatcher, EnumConstAnyOfTypeLists) {
  auto e = schema(R"({"enum":["red","green",3,null,{"a":1}]})");
  for (const char* ok : {R"("red")", R"("green")", "3", "null", R"({"a":1})"}) EXPECT_TRUE(matches(e, ok)) << ok;
  for (const char* bad : {R"("blue")", R"("re")", "4", R"({"a":2})"}) EXPECT_FALSE(matches(e, bad)) << bad;
  auto c = schema(R"({"const":"fixed"})");
  EXPECT_TRUE(matches(c, R"("fixed")"));
  EXPECT_FALSE(matches(c, R"("other")"));
  auto a = schema(R"({"anyOf":[{"type":"string"},{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}]})");
  EXPECT_TRUE(matches(a, R"("s")"));
  EXPECT_TRUE(matches(a, R"({"x":1})"));
  EXPECT_FALSE(matches(a, "1"));
  auto t = schema(R"({"type":["string","null"]})");
  EXPECT_TRUE(matches(t, "null"));
  EXPECT_TRUE(matches(t, R"("x")"));
  EXPECT_FALSE(matches(t, "true"));
  auto all = schema(R"({"allOf":[{"type":"boolean"}]})");
  EXPECT_TRUE(matches(all, "true"));
  EXPECT_FALSE(matches(all, "1"));
}

TEST(GrammarMatcher, RefsIncludingRecursion) {
  auto g = schema(R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},
                      "next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["v","next"]}},
                      "$ref":"#/$defs/node"})");
  EXPECT_TRUE(matches(g, R"({"v":1,"next":{"v":2,"next":null}})"));
  EXPECT_FALSE(matches(g, R"({"v":1,"next":{"v":2}})"));
  auto d = schema(R"({"definitions":{"s":{"type":"string"}},"type":"object","properties":{"a":{"$ref":"#/definitions/s"}},"required":["a"]})");
  EXPECT_TRUE(matches(d, R"({"a":"x"})"));
}

TEST(GrammarMatcher, StringLengthsAndNumberBounds) {
  auto s = schema(R"({"type":"string","minLength":2,"maxLength":3})");
  EXPECT_FALSE(matches(s, R"("a")"));
  EXPECT_TRUE(matches(s, R"("ab")"));
  EXPECT_TRUE(matches(s, "\"a\xC3\xA9\\n\""));  // 3 characters
  EXPECT_FALSE(matches(s, R"("abcd")"));
  auto lo = schema(R"({"type":"string","minLength":2})");
  EXPECT_FALSE(matches(lo, R"("a")"));
  EXPECT_TRUE(matches(lo, R"("abcdefgh")"));
  auto i = schema(R"({"type":"integer","minimum":-3,"maximum":12})");
  for (const char* ok : {"-3", "0", "7", "12"}) EXPECT_TRUE(matches(i, ok)) << ok;
  for (const char* bad : {"-4", "13", "-0", "012", "1.0"}) EXPECT_FALSE(matches(i, bad)) << bad;
  auto nonneg = schema(R"({"type":"number","minimum":0})");
  EXPECT_TRUE(matches(nonneg, "0.5"));
  EXPECT_FALSE(matches(nonneg, "-0.5"));
}

TEST(GrammarMatcher, ChoiceIsRawText) {
  auto g = compile_structured_output({StructuredOutputSpec::Kind::kChoice, {}, {"yes", "no", "maybe", "y"}});
  for (const char* ok : {"yes", "no", "maybe", "y"}) EXPECT_TRUE(matches(g, ok)) << ok;
  for (const char* bad : {"\"yes\"", "ye", "nope", ""}) EXPECT_FALSE(matches(g, bad)) << bad;
  GrammarMatcher m(g, empty_vocab(), {});
  ASSERT_TRUE(m.accept_bytes("y"));
  EXPECT_TRUE(m.can_terminate());
  EXPECT_FALSE(m.is_terminated());  // "yes" may follow
  ASSERT_TRUE(m.accept_bytes("es"));
  EXPECT_TRUE(m.is_terminated());
}

TEST(GrammarMatcher, RefusedSchemas) {
  for (const char* bad : {R"x({"type":"string","pattern":"a(?!b)"})x", R"({"type":"strin"})", R"({"not":{}})",
                          R"({"allOf":[{"type":"string"},{"minLength":1}]})", R"({"$ref":"#/$defs/missing"})",
                          R"({"$ref":"http://x/y.json"})", R"({"type":"array","uniqueItems":true})", "false", "3",
                          R"({"type":"object","properties":{"a":{}},"required":["b"]})",
                          R"({"type":"integer","minimum":5,"maximum":1})", R"({"$ref":"#"})",
                          R"({"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/a"},{"type":"null"}]}},"$ref":"#/$defs/a"})"}) {
    EXPECT_THROW(compile_json_schema(Js::parse(bad)), SchemaError) << bad;
  }
  // Annotations are ignored.
  EXPECT_NO_THROW(compile_json_schema(Js::parse(
      R"({"title":"T","description":"d","type":"string","format":"date","default":"x","examples":["y"]})")));
}

std::shared_ptr<const Grammar> regex(const char* pattern) {
  return compile_structured_output({StructuredOutputSpec::Kind::kRegex, {}, {}, pattern});
}

TEST(GrammarMatcher, RegexSubset) {
  struct Case {
    const char* pattern;
    std::vector<std::string> ok, bad;
  };
  const Case cases[] = {
      {"[a-z]+@[a-z]+\\.(com|org)", {"bob@example.com", "a@b.org"}, {"bob@example.net", "@a.com", "Bob@a.com"}},
      {"^\\d{3}-\\d{2,4}$", {"123-45", "123-4567"}, {"12-45", "123-4", "123-45678", "abc-12"}},
      {"(ab)*c?", {"", "ab", "ababc", "c"}, {"a", "abab cc", "cc"}},
      {"colou?r|gr[ae]y", {"color", "colour", "gray", "grey"}, {"colouur", "grby"}},
      {"[^0-9]{2}", {"ab", "\xC3\xA9!", "  "}, {"a1", "abc", "a"}},
      {"\\w+\\s\\S", {"hi x", "a_1\tZ"}, {"hi  x", "hi"}},
      {".{1,3}", {"a", "\xE2\x82\xAC\xE2\x82\xAC", "abc"}, {"", "abcd", "\n"}},
      {"caf\xC3\xA9|na\\u00efve", {"caf\xC3\xA9", "na\xC3\xAFve"}, {"cafe", "naive"}},
      {"[\\-+]?\\d+(\\.\\d+)?", {"-1.5", "+3", "42"}, {"1.", "--1"}},
  };
  for (const Case& c : cases) {
    auto g = regex(c.pattern);
    for (const auto& s : c.ok) EXPECT_TRUE(matches(g, s)) << c.pattern << " should match " << s;
    for (const auto& s : c.bad) EXPECT_FALSE(matches(g, s)) << c.pattern << " should not match " << s;
  }
  for (const char* bad : {"a(?=b)", "(a)\\1", "\\bword", "a{2,1}", "(a", "a)", "*a", "[z-a]", "[\xC3\xA0-\xC3\xBF]", "a^b", "a{1001}"})
    EXPECT_THROW(regex(bad), RegexError) << bad;
  EXPECT_THROW(regex("(a*)*"), Error);  // a star of something empty loops without consuming
}

TEST(GrammarMatcher, SchemaPatternIsAWholeJsonString) {
  auto g = schema(R"({"type":"object","properties":{"id":{"type":"string","pattern":"^[A-Z]{2}-\\d+$"}},"required":["id"]})");
  EXPECT_TRUE(matches(g, R"({"id":"AB-12"})"));
  EXPECT_FALSE(matches(g, R"({"id":"ab-12"})"));
  EXPECT_FALSE(matches(g, R"({"id":"AB-"})"));
  auto any = schema(R"({"type":"string","pattern":".*"})");
  EXPECT_TRUE(matches(any, R"("x y")"));
  EXPECT_FALSE(matches(any, R"("x"y")"));  // characters needing escapes are left out
}

TEST(GrammarMatcher, RejectedBytesLeaveTheStateUnchanged) {
  auto g = schema(R"({"type":"object","properties":{"a":{"type":"boolean"}},"required":["a"]})");
  GrammarMatcher m(g, empty_vocab(), {});
  ASSERT_TRUE(m.accept_bytes("{\"a\":"));
  EXPECT_FALSE(m.accept_bytes("1"));
  EXPECT_TRUE(m.accept_bytes("true}"));
  EXPECT_TRUE(m.is_terminated());
}

}  // namespace
}  // namespace vireo::structured
