// --tool-call-parser openai (GPT-OSS, with --reasoning-parser openai_gptoss): the harmony reasoning
// parser hands each message addressed to a tool on in the content as
//   <|call_to|>functions.get_weather<|args|>{"city": "Paris"}<|call|>
// (harmony_reasoning_parser.cc); each such block becomes a call named after the recipient without its
// "functions." namespace, its arguments the message as written (JSON text, as OpenAI's
// function.arguments). Text outside the blocks is content. A block still open at the end (max_tokens)
// is a call with what was written; arguments that are not JSON are kept as they are, as vLLM does.
#include <memory>
#include <string>

#include "server/tag_holdback.h"
#include "server/tool_parser.h"

namespace vireo::server {
namespace {

constexpr std::string_view kOpen = "<|call_to|>";
constexpr std::string_view kArgs = "<|args|>";
constexpr std::string_view kClose = "<|call|>";

class HarmonyToolParser : public ToolParser {
 public:
  ToolDelta feed(std::string_view text) override {
    ToolDelta out;
    held_ += text;
    for (;;) {
      if (!in_block_) {
        const size_t start = held_.find(kOpen);
        if (start == std::string::npos) {
          const size_t keep = partial_tag_suffix(held_, kOpen);
          out.content += held_.substr(0, held_.size() - keep);
          held_.erase(0, held_.size() - keep);
          return out;
        }
        out.content += held_.substr(0, start);
        held_.erase(0, start + kOpen.size());
        in_block_ = true;
      }
      const size_t end = held_.find(kClose);
      if (end == std::string::npos) return out;  // the block is still open
      close_block(held_.substr(0, end), out);
      held_.erase(0, end + kClose.size());
      in_block_ = false;
    }
  }

  ToolDelta finish() override {
    ToolDelta out;
    if (in_block_) close_block(held_, out);
    else out.content = held_;
    held_.clear();
    in_block_ = false;
    return out;
  }

 private:
  static void close_block(const std::string& body, ToolDelta& out) {
    const size_t a = body.find(kArgs);
    std::string name = body.substr(0, a);
    if (name.rfind("functions.", 0) == 0) name.erase(0, 10);
    std::string args = a == std::string::npos ? "" : body.substr(a + kArgs.size());
    const size_t first = args.find_first_not_of(" \n\t"), last = args.find_last_not_of(" \n\t");
    args = first == std::string::npos ? "{}" : args.substr(first, last - first + 1);
    out.calls.push_back({std::move(name), std::move(args)});
  }

  bool in_block_ = false;
  std::string held_;  // inside a block: its text so far; outside: a possible "<|call_to|>" prefix
};

}  // namespace

std::unique_ptr<ToolParser> make_harmony_tool_parser() { return std::make_unique<HarmonyToolParser>(); }

}  // namespace vireo::server
