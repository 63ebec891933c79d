// Random, seeded mutations of valid API request bodies for request_fuzz_test.cc. Everything is
// drawn from one std::mt19937_64 through `below` (plain modulo, not std::uniform_*_distribution,
// whose output differs between standard libraries), so a seed names the same inputs everywhere.
//
// Values JSON cannot hold (1e309, NaN, invalid UTF-8, lone surrogate escapes, 10,000-deep
// nesting) are put in the tree as placeholder strings and spliced in as raw text after dumping.
#pragma once
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

namespace vireo::testing::fuzz {

using nlohmann::json;

struct Rng {
  std::mt19937_64 gen;
  explicit Rng(uint64_t seed) : gen(seed) {}
  size_t below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(gen() % n); }
  bool percent(int p) { return static_cast<int>(below(100)) < p; }
  template <class T>
  const T& pick(const std::vector<T>& v) { return v[below(v.size())]; }
};

// A mutated body under construction: the tree plus the raw texts its placeholders stand for.
struct Mutant {
  json body;
  std::vector<std::string> raws;
  json raw(std::string text) {
    raws.push_back(std::move(text));
    return "\x01RAW" + std::to_string(raws.size() - 1) + "\x01";
  }
  std::string text() const {
    std::string s = body.dump();  // the placeholders are plain ASCII, so dump cannot fail
    for (size_t i = 0; i < raws.size(); ++i) {
      // dump writes \x01 as \u0001
      const std::string key = "\"\\u0001RAW" + std::to_string(i) + "\\u0001\"";
      for (size_t pos = s.find(key); pos != std::string::npos; pos = s.find(key, pos + raws[i].size()))
        s.replace(pos, key.size(), raws[i]);
    }
    return s;
  }
};

inline std::string nested(size_t depth, bool arrays) {
  if (arrays) return std::string(depth, '[') + std::string(depth, ']');
  std::string s;
  for (size_t i = 0; i < depth; ++i) s += "{\"a\":";
  s += "1";
  s += std::string(depth, '}');
  return s;
}

// Numbers JSON parsers disagree on or cannot represent.
inline const std::vector<std::string>& raw_numbers() {
  static const std::vector<std::string> v = {
      "1e309", "-1e309", "NaN", "Infinity", "-Infinity", "18446744073709551616", "-9223372036854775809",
      "1e-400", "123456789012345678901234567890", "-0", "0.0000001", "1E2", "00", "1.", ".5", "+1", "0x10", "--1"};
  return v;
}

// Strings that are not valid UTF-8 JSON text: raw bad bytes and escapes of lone surrogates.
inline const std::vector<std::string>& raw_bad_strings() {
  static const std::vector<std::string> v = {
      "\"\xff\xfe\"",        "\"a\xc0\xaf\"",        "\"\xed\xa0\x80\"",         "\"\xf4\x90\x80\x80\"",
      "\"abc\xe2\x82\"",     "\"\\ud800\"",          "\"x\\udc00y\"",             "\"\\ud800\\u0041\"",
      "\"\\ud83d\\ude00\"",  "\"\\u0000\"",          "\"tab\there\"",             "\"\\x41\"",
      "\"\\uZZZZ\"",         "\"unterminated"};
  return v;
}

// Strings that are long, not UTF-8, or hold nesting that a field parses again (a schema given
// as JSON text, a regular expression, tool-call arguments).
inline json string_value(Rng& rng, Mutant& m) {
  switch (rng.below(4)) {
    case 0: return m.raw(rng.pick(raw_bad_strings()));
    case 1: {
      static const std::vector<size_t> sizes = {1000, 5000, 70000, 300000};
      return std::string(rng.pick(sizes), static_cast<char>('a' + rng.below(26)));
    }
    case 2: {
      static const std::vector<size_t> depths = {251, 100000, 100000};  // the parser's limit is 250
      const size_t d = rng.pick(depths);
      return std::string(d, '(') + "a" + std::string(d, ')');
    }
    default: {
      static const std::vector<size_t> depths = {129, 20000, 20000};  // the body's limit is 128
      const size_t d = rng.pick(depths);
      std::string s;
      for (size_t i = 0; i < d; ++i) s += "{\"items\":";
      return s + "{}" + std::string(d, '}');
    }
  }
}

inline json weird_value(Rng& rng, Mutant& m) {
  switch (rng.below(6)) {
    case 0: {  // scalars of every type, at and past the edges of int32 / int64 / uint64 / double
      static const std::vector<json> v = {
          nullptr, true, false, 0, -1, 1, 2, 0.5, -0.0, 1e-320, 2147483648LL, 2147483647, -2147483649LL,
          9007199254740993LL, INT64_MAX, uint64_t{1} << 63, UINT64_MAX, INT64_MIN, 1e30, -1e30, 1.7976931348623157e308,
          128, 129, 20, 21, 1024, 1025, 256, 255, 260, -100, 100.5};
      return rng.pick(v);
    }
    case 1: return m.raw(rng.pick(raw_numbers()));
    case 2: {
      static const std::vector<json> v = {
          "", "a", "5", "-1", "true", "null", "auto", "none", "required", "function", "json_object", "json_schema",
          "text", "user", "assistant", "system", "tool", "developer", "fake-model", "message", "function_call",
          "function_call_output", "input_text", "image_url", "\xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x98\x80",
          "\xef\xbf\xbf\xe2\x80\x8b", "<think>", "</tool_call>", "{\"a\":", "\\", "\n\n\n", "%s%n{}{{}}"};
      return rng.pick(v);
    }
    case 3: return string_value(rng, m);
    case 4: {
      static const std::vector<json> v = {
          json::array(), {1, 2, 3}, {260}, {-1}, {2147483648LL}, {0.5}, {"a"}, json::array({json::array()}),
          {nullptr}, json::array({json::object()}), {1, "a"}, json::array({{1, 2}, {3}}), {true}};
      return rng.pick(v);
    }
    default: {
      static const std::vector<json> v = {
          json::object(), {{"a", 1}}, {{"type", "function"}}, {{"type", "text"}, {"text", 5}},
          {{"type", "json_schema"}, {"json_schema", {{"schema", json::object()}}}},
          {{"role", "user"}, {"content", nullptr}}, {{"name", ""}}, {{"65", 1e30}}};
      return rng.pick(v);
    }
  }
}

// Every node of the tree, as a JSON pointer (the root is "").
inline void collect(const json& j, const json::json_pointer& at, std::vector<json::json_pointer>& out) {
  out.push_back(at);
  if (j.is_object())
    for (auto it = j.begin(); it != j.end(); ++it) collect(*it, at / it.key(), out);
  else if (j.is_array())
    for (size_t i = 0; i < j.size(); ++i) collect(j[i], at / i, out);
}

inline void mutate_tree(Rng& rng, Mutant& m) {
  std::vector<json::json_pointer> nodes;
  collect(m.body, json::json_pointer(), nodes);
  // The root is replaced rarely: a non-object body is one case, not a tenth of all cases.
  const json::json_pointer at = nodes.size() > 1 && !rng.percent(2) ? nodes[1 + rng.below(nodes.size() - 1)]
                                                                      : json::json_pointer();
  json& node = m.body[at];
  switch (rng.below(9)) {
    case 0:  // drop the field / element
      if (!at.empty()) {
        json& parent = m.body[at.parent_pointer()];
        if (parent.is_object()) parent.erase(at.back());
        else parent.erase(static_cast<size_t>(std::stoul(at.back())));
      }
      break;
    case 1:
    case 2:
    case 3: node = node.is_string() && rng.percent(50) ? string_value(rng, m) : weird_value(rng, m); break;
    case 4: {  // an unknown (or misplaced well-known) field; fields whose text is parsed again often
      json* obj = node.is_object() ? &node : &m.body;
      static const std::vector<std::string> keys = {
          "x", "", "prompt", "messages", "tools", "n", "stream", "add_generation_prompt", "bos_token",
          "__proto__", std::string("nul\0key", 7), "\xf0\x9f\x98\x80", std::string(3000, 'k'), "guided_json",
          "guided_regex", "guided_choice", "pattern", "arguments", "response_format", "structured_outputs",
          "logit_bias", "tool_choice", "stop", "previous_response_id", "input"};
      if (obj->is_object()) (*obj)[rng.pick(keys)] = rng.percent(50) ? string_value(rng, m) : weird_value(rng, m);
      break;
    }
    case 5: node = rng.percent(50) ? json::array({node}) : json({{"x", node}}); break;
    case 6:  // empty it, or repeat an element
      if (node.is_array() && !node.empty() && rng.percent(60)) {
        static const std::vector<size_t> reps = {2, 50, 300};
        json e = node[0];
        for (size_t k = 0, n = rng.pick(reps); k < n; ++k) node.push_back(e);
      } else if (node.is_structured()) {
        node = node.is_array() ? json::array() : json::object();
      } else {
        node = weird_value(rng, m);
      }
      break;
    case 7: {  // deep nesting: just past the server's limit, and far past it
      static const std::vector<size_t> depths = {127, 129, 1000, 10000};
      node = m.raw(nested(rng.pick(depths), rng.percent(50)));
      break;
    }
    default:  // a duplicate key: the same field twice with different values
      if (node.is_object() && !node.empty()) {
        std::string key = node.begin().key();
        node[key + "\x02"] = weird_value(rng, m);  // renamed to the key below, after dumping
        m.raws.push_back("DUP:" + key);
      }
      break;
  }
}

// Duplicate keys: the tree cannot hold them, so "<key>\x02" is renamed to "<key>" in the text.
inline std::string finish_text(const Mutant& m) {
  std::string s = m.text();
  for (const auto& r : m.raws) {
    if (r.rfind("DUP:", 0) != 0) continue;
    json k = r.substr(4) + "\x02";
    const std::string from = k.dump(), to = json(r.substr(4)).dump();
    if (auto pos = s.find(from); pos != std::string::npos) s.replace(pos, from.size(), to);
  }
  return s;
}

// Byte-level damage to a whole body.
inline std::string mutate_text(Rng& rng, std::string s) {
  switch (rng.below(6)) {
    case 0: return s.substr(0, rng.below(s.size() + 1));  // truncated
    case 1:
      for (int k = 0, n = 1 + static_cast<int>(rng.below(4)); k < n && !s.empty(); ++k)
        s[rng.below(s.size())] = static_cast<char>(rng.below(256));
      return s;
    case 2:
      s.insert(rng.below(s.size() + 1), 1, static_cast<char>(rng.below(256)));
      return s;
    case 3: {
      static const std::vector<std::string> whole = {
          "", " ", "\n", "null", "[]", "\"str\"", "42", "{}", "{", "}", "{\"a\":}", "{,}", "{\"a\" 1}",
          "{'prompt':'a'}", "{\"prompt\":\"a\"}//c", "/*c*/{}", "\xef\xbb\xbf{}"};
      return rng.pick(whole);
    }
    case 4: {
      static const std::vector<std::string> prefixes = {"\xef\xbb\xbf", " \t\r\n", std::string(1, '\0'), "x"};
      return rng.pick(prefixes) + s;
    }
    default: {
      static const std::vector<std::string> suffixes = {" x", "{}", ",", std::string(1, '\0'), " \n ", "]"};
      return s + rng.pick(suffixes);
    }
  }
}

}  // namespace vireo::testing::fuzz
