// granite (IBM Granite 3.x; vLLM's parser of that name): the whole answer is a JSON list of calls,
//   <|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris"}}, ...]
// after an optional <|tool_call|> (Granite 3.0's token, usually stripped as special) or <tool_call>
// (Granite 3.1's text). Held to the end once the answer starts with either or with '['
// (held_answer_tool_parser.h); a list that does not parse, or an entry without a name, makes the answer
// content, as vLLM does.
#include <memory>

#include "server/held_answer_tool_parser.h"

namespace vireo::server {
namespace {

constexpr std::string_view kToken = "<|tool_call|>", kString = "<tool_call>";

class GraniteToolParser : public HeldAnswerToolParser {
 public:
  GraniteToolParser() : HeldAnswerToolParser({kToken, kString}, '[') {}

 private:
  std::optional<std::vector<ToolCall>> parse_calls(std::string_view answer) const override {
    size_t i = skip_space(answer, 0);
    for (std::string_view tag : {kToken, kString})
      if (answer.substr(i).starts_with(tag)) i = skip_space(answer, i + tag.size());
    Json list = Json::parse(answer.substr(i), nullptr, /*allow_exceptions=*/false);
    if (!list.is_array() || list.empty()) return std::nullopt;
    std::vector<ToolCall> calls;
    for (const auto& entry : list) {
      auto call = tool_call_from_json(entry);
      if (!call) return std::nullopt;
      calls.push_back(std::move(*call));
    }
    return calls;
  }
};

}  // namespace

std::unique_ptr<ToolParser> make_granite_tool_parser() { return std::make_unique<GraniteToolParser>(); }

}  // namespace vireo::server
