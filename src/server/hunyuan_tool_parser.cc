// hunyuan_a13b (Hunyuan-A13B and the HunYuan chat models that share its template; vLLM's parser of that
// name): the calls are one block after the content,
//   <tool_calls>[{"name": "get_weather", "arguments": {"city": "Paris"}}, ...]</tool_calls>
// A block whose body is not a JSON list of {"name", "arguments"} goes back to the content verbatim (tags
// included), as hermes' blocks do; entries without a name or arguments are skipped, as vLLM does. Blocks
// inside the reasoning never reach this parser (the reasoning parser runs first).
#include <memory>
#include <string>

#include "server/tagged_block_tool_parser.h"

namespace vireo::server {
namespace {

constexpr std::string_view kOpen = "<tool_calls>";
constexpr std::string_view kClose = "</tool_calls>";

class HunyuanToolParser : public TaggedBlockToolParser {
 public:
  HunyuanToolParser() : TaggedBlockToolParser(kOpen, kClose) {}

 private:
  void close_block(const std::string& body, bool closed, ToolDelta& out) const override {
    Json list = Json::parse(body, nullptr, /*allow_exceptions=*/false);
    std::vector<ToolCall> calls;
    if (list.is_array())
      for (const auto& entry : list)
        if (entry.is_object() && entry.contains("arguments"))
          if (auto call = tool_call_from_json(entry)) calls.push_back(std::move(*call));
    if (!calls.empty()) {
      for (auto& c : calls) out.calls.push_back(std::move(c));
      return;
    }
    give_back(body, closed, out);
  }
};

}  // namespace

std::unique_ptr<ToolParser> make_hunyuan_tool_parser() { return std::make_unique<HunyuanToolParser>(); }

}  // namespace vireo::server
