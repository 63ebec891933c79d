// --reasoning-parser openai_gptoss: GPT-OSS's harmony format. The model answers in messages
//   <|channel|>analysis<|message|>...<|end|><|start|>assistant<|channel|>final<|message|>...<|return|>
// (the prompt ends with <|start|>assistant): the analysis channel is the reasoning, the final channel
// (and commentary without a recipient) the content; headers and the special tokens never reach the
// client. A message to a recipient (" to=functions.x" in its header: a tool call) is dropped, unless the
// request parses tool calls with --tool-call-parser openai: then it goes on in the content as
//   <|call_to|>functions.x<|args|>{...}<|call|>
// which that parser (harmony_tool_parser.cc) turns into a call. The server keeps special tokens in these chat outputs
// (ModelInfo::chat_keeps_special_tokens), or the markers would be gone before this parser sees them.
// Output that opens with neither a marker nor a recipient (a model that does not speak harmony) passes
// through as content.
#include <algorithm>
#include <memory>
#include <string>

#include "server/reasoning_parser.h"
#include "server/tag_holdback.h"

namespace vireo::server {
namespace {

constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kChannel = "<|channel|>";
constexpr std::string_view kEnds[] = {"<|end|>", "<|return|>", "<|call|>"};
constexpr std::string_view kCallTo = "<|call_to|>", kArgs = "<|args|>", kCallEnd = "<|call|>";  // the hand-off

class HarmonyReasoningParser : public ReasoningParser {
 public:
  explicit HarmonyReasoningParser(bool keep_calls) : keep_calls_(keep_calls) {}

  ReasoningDelta feed(std::string_view text) override {
    ReasoningDelta out;
    held_ += text;
    while (true) {
      if (state_ == State::kHeader) {
        const size_t m = held_.find(kMessage);
        if (!seen_header_ && !held_.empty() && !opens_header(held_)) {
          state_ = State::kPlain;  // the output does not open with a harmony header: plain content
          continue;
        }
        if (m == std::string::npos) return out;
        target_ = route(std::string_view(held_).substr(0, m));
        if (target_ == Target::kDrop && keep_calls_) {  // hand the call on to the openai tool parser
          target_ = Target::kCall;
          out.content += std::string(kCallTo) + recipient(std::string_view(held_).substr(0, m)) + std::string(kArgs);
        }
        held_.erase(0, m + kMessage.size());
        seen_header_ = true;
        state_ = State::kBody;
      }
      if (state_ == State::kPlain) {
        out.content += held_;
        held_.clear();
        return out;
      }
      // kBody: up to the first end marker; a possible marker prefix at the tail waits.
      size_t end = std::string::npos, len = 0;
      for (std::string_view e : kEnds)
        if (size_t p = held_.find(e); p < end) end = p, len = e.size();
      if (end == std::string::npos) {
        size_t keep = 0;
        for (std::string_view e : kEnds) keep = std::max(keep, partial_tag_suffix(held_, e));
        emit(out, held_.substr(0, held_.size() - keep));
        held_.erase(0, held_.size() - keep);
        return out;
      }
      emit(out, held_.substr(0, end));
      if (target_ == Target::kCall) out.content += kCallEnd;
      held_.erase(0, end + len);
      state_ = State::kHeader;
    }
  }

  ReasoningDelta finish() override {
    ReasoningDelta out;
    if (state_ == State::kBody) emit(out, held_);  // cut by max_tokens inside a message (a call stays open)
    if (state_ == State::kPlain || (state_ == State::kHeader && !seen_header_)) out.content += held_;  // never harmony
    held_.clear();
    return out;
  }

 private:
  enum class State { kHeader, kBody, kPlain };
  enum class Target { kReasoning, kContent, kDrop, kCall };

  // The recipient a header names after " to=" ("functions.get_weather"), up to a space or a marker.
  static std::string recipient(std::string_view header) {
    const size_t at = header.find(" to=");
    if (at == std::string_view::npos) return "";
    std::string_view r = header.substr(at + 4);
    return std::string(r.substr(0, r.find_first_of(" <")));
  }

  // Whether text (all or the start of the output) is or may become a header's start: a marker, or the
  // recipient the prompt's <|start|>assistant may be followed by (" to=functions.f<|channel|>...").
  static bool opens_header(std::string_view text) {
    for (std::string_view start : {std::string_view("<|"), std::string_view(" to=")})
      if (text.starts_with(start) || start.starts_with(text)) return true;
    return false;
  }

  // The channel a header names: analysis -> reasoning; final / commentary -> content; a recipient -> drop.
  static Target route(std::string_view header) {
    if (header.find(" to=") != std::string_view::npos || header.find("<|constrain|>") != std::string_view::npos)
      return Target::kDrop;
    const size_t c = header.find(kChannel);
    if (c == std::string_view::npos) return Target::kContent;
    std::string_view name = header.substr(c + kChannel.size());
    name = name.substr(0, name.find_first_of(" <"));
    return name == "analysis" ? Target::kReasoning : Target::kContent;
  }

  void emit(ReasoningDelta& out, const std::string& text) const {
    if (target_ == Target::kReasoning) out.reasoning += text;
    if (target_ == Target::kContent || target_ == Target::kCall) out.content += text;
  }

  const bool keep_calls_;
  State state_ = State::kHeader;
  Target target_ = Target::kContent;
  bool seen_header_ = false;
  std::string held_;
};

}  // namespace

std::unique_ptr<ReasoningParser> make_openai_gptoss_reasoning_parser(bool keep_calls) {
  return std::make_unique<HarmonyReasoningParser>(keep_calls);
}

}  // namespace vireo::server
