// deepseek_v3 / deepseek_v31 (DeepSeek-V3, R1-0528, V3.1 and later; vLLM's parsers of those names): the
// calls come in one section after the content,
//   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>CALL<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
// with each CALL either V3's  "function<｜tool▁sep｜>get_weather\n```json\n{...}\n```"
// or V3.1's                   "get_weather<｜tool▁sep｜>{...}".
// One parser reads both (the ```json fence tells them apart). The markers are ordinary added tokens (not
// special), so they reach the text whatever skip_special_tokens says. Text before the section is content;
// a section whose calls do not all parse goes back to the content verbatim (markers included), as hermes'
// blocks do; a section still open at the end is read the same way.
#include <memory>
#include <string>

#include "server/tagged_block_tool_parser.h"

namespace vireo::server {
namespace {

constexpr std::string_view kSectionOpen = "<｜tool▁calls▁begin｜>";
constexpr std::string_view kSectionClose = "<｜tool▁calls▁end｜>";
constexpr std::string_view kCallOpen = "<｜tool▁call▁begin｜>";
constexpr std::string_view kCallClose = "<｜tool▁call▁end｜>";
constexpr std::string_view kSep = "<｜tool▁sep｜>";

std::string trimmed(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return "";
  return std::string(s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1));
}

// One CALL (between the call markers) in either form; nullopt when it is neither.
std::optional<ToolCall> parse_call(std::string_view call) {
  const size_t sep = call.find(kSep);
  if (sep == std::string_view::npos) return std::nullopt;
  std::string_view left = call.substr(0, sep), right = call.substr(sep + kSep.size());
  std::string name, args;
  constexpr std::string_view kFence = "```json";
  if (const size_t nl = right.find('\n'); nl != std::string_view::npos && right.substr(nl + 1, kFence.size()) == kFence) {
    name = trimmed(right.substr(0, nl));  // V3: "<type><sep><name>\n```json\n<args>\n```"
    std::string_view body = right.substr(nl + 1 + kFence.size());
    const size_t end = body.rfind("```");
    args = trimmed(end == std::string_view::npos ? body : body.substr(0, end));
  } else {
    name = trimmed(left);  // V3.1: "<name><sep><args>"
    args = trimmed(right);
  }
  if (name.empty()) return std::nullopt;
  Json parsed = Json::parse(args.empty() ? std::string("{}") : args, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return std::nullopt;
  return ToolCall{name, args.empty() ? "{}" : args};
}

class DeepSeekToolParser : public TaggedBlockToolParser {
 public:
  DeepSeekToolParser() : TaggedBlockToolParser(kSectionOpen, kSectionClose) {}

 private:
  void close_block(const std::string& body, bool closed, ToolDelta& out) const override {
    std::vector<ToolCall> calls;
    bool ok = true;
    size_t pos = 0;
    for (;;) {
      const size_t start = body.find(kCallOpen, pos);
      if (start == std::string::npos) break;
      const size_t end = body.find(kCallClose, start + kCallOpen.size());
      const size_t stop = end == std::string::npos ? body.size() : end;  // the last call may be cut off
      auto call = parse_call(std::string_view(body).substr(start + kCallOpen.size(), stop - start - kCallOpen.size()));
      if (!call) {
        ok = false;
        break;
      }
      calls.push_back(std::move(*call));
      if (end == std::string::npos) break;
      pos = end + kCallClose.size();
    }
    if (ok && !calls.empty()) {
      for (auto& c : calls) out.calls.push_back(std::move(c));
      return;
    }
    give_back(body, closed, out);
  }
};

}  // namespace

std::unique_ptr<ToolParser> make_deepseek_tool_parser() { return std::make_unique<DeepSeekToolParser>(); }

}  // namespace vireo::server
