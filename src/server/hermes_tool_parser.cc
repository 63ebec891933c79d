// hermes (Hermes 2 Pro, Qwen2.5, Qwen3): each call is a block
//   <tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>
// Text outside the blocks is content. While a block is open nothing of it is released; when it
// closes it becomes one call, or, if its JSON does not parse, goes back to the content verbatim
// (tags included). A block still open at the end (max_tokens, a stop string) is parsed the same
// way, as vLLM's `<tool_call>(.*)` alternative does.
#include <memory>
#include <string>

#include "server/tagged_block_tool_parser.h"

namespace vireo::server {
namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

class HermesToolParser : public TaggedBlockToolParser {
 public:
  HermesToolParser() : TaggedBlockToolParser(kOpen, kClose) {}

 private:
  void close_block(const std::string& body, bool closed, ToolDelta& out) const override {
    Json j = Json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (auto call = tool_call_from_json(j)) {
      out.calls.push_back(std::move(*call));
      return;
    }
    give_back(body, closed, out);
  }
};

}  // namespace

std::unique_ptr<ToolParser> make_hermes_tool_parser() { return std::make_unique<HermesToolParser>(); }

}  // namespace vireo::server
