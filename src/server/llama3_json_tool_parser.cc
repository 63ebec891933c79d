// llama3_json (Llama 3.1/3.2 JSON tool calling): the whole answer is the call(s),
//   {"name": "get_weather", "parameters": {"city": "Paris"}}
// optionally after <|python_tag|>, several separated by ';'. Held to the end once the answer starts
// with '{' or the tag (held_answer_tool_parser.h); any part that does not parse makes it all content.
#include <memory>
#include <string>

#include "server/held_answer_tool_parser.h"

namespace vireo::server {
namespace {

constexpr std::string_view kPythonTag = "<|python_tag|>";

// Index one past the '}' that closes the object starting at s[start] == '{' (npos if none).
size_t object_end(std::string_view s, size_t start) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = start; i < s.size(); ++i) {
    char c = s[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

// The calls in `s` (after the optional tag), or nullopt when any part is not one.
std::optional<std::vector<ToolCall>> parse_json_calls(std::string_view s) {
  size_t i = skip_space(s, 0);
  if (s.substr(i).starts_with(kPythonTag)) i = skip_space(s, i + kPythonTag.size());
  std::vector<ToolCall> calls;
  while (i < s.size()) {
    if (s[i] != '{') return std::nullopt;
    size_t end = object_end(s, i);
    if (end == std::string_view::npos) return std::nullopt;
    auto call = tool_call_from_json(Json::parse(s.substr(i, end - i), nullptr, /*allow_exceptions=*/false));
    if (!call) return std::nullopt;
    calls.push_back(std::move(*call));
    i = skip_space(s, end);
    if (i < s.size()) {
      if (s[i] != ';') return std::nullopt;
      i = skip_space(s, i + 1);
    }
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

class Llama3JsonToolParser : public HeldAnswerToolParser {
 public:
  Llama3JsonToolParser() : HeldAnswerToolParser({kPythonTag}, '{') {}

 private:
  std::optional<std::vector<ToolCall>> parse_calls(std::string_view answer) const override {
    return parse_json_calls(answer);
  }
};

}  // namespace

std::unique_ptr<ToolParser> make_llama3_json_tool_parser() { return std::make_unique<Llama3JsonToolParser>(); }

}  // namespace vireo::server
