// <think>...</think> reasoning, the two vLLM flavours:
//   deepseek_r1: the output starts inside the reasoning (recent templates open <think> in the
//     prompt; a <think> the model writes itself is dropped); everything up to </think> is
//     reasoning, the rest content. No </think> at all: everything is reasoning.
//   qwen3: the model opens the reasoning itself, so only an output that starts with <think> has
//     any; an output without it (enable_thinking=false, or a model that does not think) is all
//     content. An opened but never closed <think> (cut by max_tokens) stays reasoning, as vLLM's
//     streaming path (and its current non-streaming path) do.
//   seed_oss (Seed-OSS): deepseek_r1's rule with <seed:think>...</seed:think> (vLLM's SeedOSSReasoningParser).
// The tags never reach the client. Tags inside the content are left alone.
#include <memory>
#include <string>

#include "server/reasoning_parser.h"
#include "server/tag_holdback.h"

namespace vireo::server {
namespace {

class ThinkReasoningParser : public ReasoningParser {
 public:
  explicit ThinkReasoningParser(bool starts_in_reasoning, std::string_view open = "<think>",
                                std::string_view close = "</think>")
      : starts_in_reasoning_(starts_in_reasoning), open_tag_(open), close_tag_(close) {}

  ReasoningDelta feed(std::string_view text) override {
    ReasoningDelta out;
    held_ += text;
    if (state_ == State::kStart) {
      if (held_.starts_with(open_tag_)) {
        held_.erase(0, open_tag_.size());
        state_ = State::kReasoning;
      } else if (std::string_view(open_tag_).starts_with(held_)) {
        return out;  // "" or "<thi": cannot tell yet
      } else {
        state_ = starts_in_reasoning_ ? State::kReasoning : State::kContent;
      }
    }
    if (state_ == State::kReasoning) {
      size_t end = held_.find(close_tag_);
      if (end == std::string::npos) {
        size_t keep = partial_tag_suffix(held_, close_tag_);
        out.reasoning = held_.substr(0, held_.size() - keep);
        held_.erase(0, held_.size() - keep);
        return out;
      }
      out.reasoning = held_.substr(0, end);
      held_.erase(0, end + close_tag_.size());
      state_ = State::kContent;
    }
    out.content = std::move(held_);
    held_.clear();
    return out;
  }

  ReasoningDelta finish() override {
    ReasoningDelta out;
    bool reasoning = state_ == State::kReasoning || (state_ == State::kStart && starts_in_reasoning_);
    (reasoning ? out.reasoning : out.content) = std::move(held_);
    held_.clear();
    state_ = State::kContent;
    return out;
  }

 private:
  enum class State { kStart, kReasoning, kContent };
  bool starts_in_reasoning_;
  const std::string_view open_tag_, close_tag_;  // the tags (string literals)
  State state_ = State::kStart;
  std::string held_;  // text not released yet: a possible tag prefix
};

}  // namespace

std::unique_ptr<ReasoningParser> make_qwen3_reasoning_parser() { return std::make_unique<ThinkReasoningParser>(false); }
std::unique_ptr<ReasoningParser> make_deepseek_r1_reasoning_parser() {
  return std::make_unique<ThinkReasoningParser>(true);
}
std::unique_ptr<ReasoningParser> make_seed_oss_reasoning_parser() {
  return std::make_unique<ThinkReasoningParser>(true, "<seed:think>", "</seed:think>");
}

}  // namespace vireo::server
