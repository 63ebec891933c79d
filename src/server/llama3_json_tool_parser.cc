// llama3_json (Llama 3.1/3.2 JSON tool calling): the whole answer is the call(s),
//   {"name": "get_weather", "parameters": {"city": "Paris"}}
// optionally after <|python_tag|>, several separated by ';'. Whether the answer is a call shows
// in its first non-blank characters ('{' or the tag); from then on everything is held to the end,
// because only the whole text can say whether it parses. If any part does not, the answer is
// plain content, as vLLM does. Any other answer streams as content.
#include <cctype>
#include <memory>
#include <string>

#include "server/tool_parser.h"

namespace vireo::server {
namespace {

constexpr std::string_view kPythonTag = "<|python_tag|>";

size_t skip_space(std::string_view s, size_t i) {
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return i;
}

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
std::optional<std::vector<ToolCall>> parse_calls(std::string_view s) {
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

class Llama3JsonToolParser : public ToolParser {
 public:
  ToolDelta feed(std::string_view text) override {
    ToolDelta out;
    if (state_ == State::kContent) {
      out.content = text;
      return out;
    }
    held_ += text;
    if (state_ == State::kStart) {
      std::string_view rest = std::string_view(held_).substr(skip_space(held_, 0));
      if (rest.empty() || (rest.size() < kPythonTag.size() && kPythonTag.starts_with(rest))) return out;
      if (rest.starts_with('{') || rest.starts_with(kPythonTag)) {
        state_ = State::kCall;
      } else {
        state_ = State::kContent;
        out.content = std::move(held_);
        held_.clear();
      }
    }
    return out;  // kCall: held to the end
  }

  ToolDelta finish() override {
    ToolDelta out;
    if (state_ == State::kCall) {
      if (auto calls = parse_calls(held_)) out.calls = std::move(*calls);
      else out.content = held_;
    } else {
      out.content = held_;
    }
    held_.clear();
    state_ = State::kContent;
    return out;
  }

 private:
  enum class State { kStart, kCall, kContent };
  State state_ = State::kStart;
  std::string held_;
};

}  // namespace

std::unique_ptr<ToolParser> make_llama3_json_tool_parser() { return std::make_unique<Llama3JsonToolParser>(); }

}  // namespace vireo::server
