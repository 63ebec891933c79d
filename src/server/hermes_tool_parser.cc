// hermes (Hermes 2 Pro, Qwen2.5, Qwen3): each call is a block
//   <tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>
// Text outside the blocks is content. While a block is open nothing of it is released; when it
// closes it becomes one call, or, if its JSON does not parse, goes back to the content verbatim
// (tags included). A block still open at the end (max_tokens, a stop string) is parsed the same
// way, as vLLM's `<tool_call>(.*)` alternative does.
#include <memory>
#include <string>

#include "server/tag_holdback.h"
#include "server/tool_parser.h"

namespace vireo::server {
namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

class HermesToolParser : public ToolParser {
 public:
  ToolDelta feed(std::string_view text) override {
    ToolDelta out;
    held_ += text;
    for (;;) {
      if (!in_block_) {
        size_t start = held_.find(kOpen);
        if (start == std::string::npos) {
          size_t keep = partial_tag_suffix(held_, kOpen);
          out.content += held_.substr(0, held_.size() - keep);
          held_.erase(0, held_.size() - keep);
          return out;
        }
        out.content += held_.substr(0, start);
        held_.erase(0, start + kOpen.size());
        in_block_ = true;
      }
      size_t end = held_.find(kClose);
      if (end == std::string::npos) return out;  // the block is still open
      close_block(held_.substr(0, end), true, out);
      held_.erase(0, end + kClose.size());
      in_block_ = false;
    }
  }

  ToolDelta finish() override {
    ToolDelta out;
    if (in_block_) close_block(held_, false, out);
    else out.content = held_;
    held_.clear();
    in_block_ = false;
    return out;
  }

 private:
  static void close_block(const std::string& body, bool closed, ToolDelta& out) {
    Json j = Json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (auto call = tool_call_from_json(j)) {
      out.calls.push_back(std::move(*call));
      return;
    }
    out.content += std::string(kOpen) + body + (closed ? std::string(kClose) : "");
  }

  bool in_block_ = false;
  std::string held_;  // inside a block: its body so far; outside: a possible "<tool_call>" prefix
};

}  // namespace

std::unique_ptr<ToolParser> make_hermes_tool_parser() { return std::make_unique<HermesToolParser>(); }

}  // namespace vireo::server
