// The streaming shape of the tool parsers whose calls are the whole answer (llama3_json's JSON objects,
// granite's JSON list): whether the answer is a call shows in its first non-blank characters (one of the
// parser's tags, or its opening character); from then on everything is held to the end, because only the
// whole text can say whether it parses. If it does not, the answer is plain content, as vLLM does. Any
// other answer streams as content.
#pragma once
#include <cctype>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/tool_parser.h"

namespace vireo::server {

inline size_t skip_space(std::string_view s, size_t i) {
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return i;
}

class HeldAnswerToolParser : public ToolParser {
 public:
  // tags: markers a call may start with (string literals); open: the character a bare call starts with.
  HeldAnswerToolParser(std::vector<std::string_view> tags, char open) : tags_(std::move(tags)), open_(open) {}

  ToolDelta feed(std::string_view text) override {
    ToolDelta out;
    if (state_ == State::kContent) {
      out.content = text;
      return out;
    }
    held_ += text;
    if (state_ == State::kStart) {
      std::string_view rest = std::string_view(held_).substr(skip_space(held_, 0));
      if (rest.empty()) return out;
      bool call = rest.front() == open_, undecided = false;
      for (std::string_view tag : tags_) {
        call = call || rest.starts_with(tag);
        undecided = undecided || (rest.size() < tag.size() && tag.starts_with(rest));
      }
      if (!call && undecided) return out;
      if (call) {
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
    std::optional<std::vector<ToolCall>> calls;
    if (state_ == State::kCall) calls = parse_calls(held_);
    if (calls) out.calls = std::move(*calls);
    else out.content = held_;
    held_.clear();
    state_ = State::kContent;
    return out;
  }

 protected:
  // The calls in the whole answer, or nullopt when it is not (all) calls.
  virtual std::optional<std::vector<ToolCall>> parse_calls(std::string_view answer) const = 0;

 private:
  enum class State { kStart, kCall, kContent };
  const std::vector<std::string_view> tags_;
  const char open_;
  State state_ = State::kStart;
  std::string held_;
};

}  // namespace vireo::server
