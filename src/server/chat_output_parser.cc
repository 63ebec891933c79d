#include "server/chat_output_parser.h"

#include "server/forced_tool_parser.h"
#include "server/openai_errors.h"

namespace vireo::server {

void ChatDelta::append(ChatDelta d) {
  reasoning += d.reasoning;
  content += d.content;
  for (auto& c : d.calls) calls.push_back(std::move(c));
}

ChatDelta ChatOutputParser::tool_stage(ReasoningDelta r, bool last) {
  ChatDelta out;
  out.reasoning = std::move(r.reasoning);
  if (!tools_) {
    out.content = std::move(r.content);
    return out;
  }
  ToolDelta t = tools_->feed(r.content);
  if (last) t.append(tools_->finish());
  out.content = std::move(t.content);
  out.calls = std::move(t.calls);
  return out;
}

ChatDelta ChatOutputParser::feed(std::string_view text) {
  if (!reasoning_) return tool_stage({"", std::string(text)}, false);
  return tool_stage(reasoning_->feed(text), false);
}

ChatDelta ChatOutputParser::finish() {
  if (!reasoning_) return tool_stage({}, true);
  return tool_stage(reasoning_->finish(), true);
}

ChatDelta parse_output_step(ChatOutputParser* parser, std::string_view text, bool finished) {
  ChatDelta d;
  if (!parser) {
    d.content = std::string(text);
    return d;
  }
  d = parser->feed(text);
  if (finished) d.append(parser->finish());
  return d;
}

ChatDelta ChatOutputParser::parse_all(std::string_view text) {
  ChatDelta out = feed(text);
  out.append(finish());
  return out;
}

std::unique_ptr<ChatOutputParser> ChatParsing::make() const {
  std::unique_ptr<ToolParser> tools;
  if (!forced_tool_choice.empty()) tools = make_forced_tool_parser(forced_tool_choice, forced_function);
  else if (!tool_parser.empty()) tools = make_tool_parser(tool_parser, request_tools);
  return std::make_unique<ChatOutputParser>(
      reasoning_parser.empty() ? nullptr : make_reasoning_parser(reasoning_parser, tools ? tool_parser : ""),
                                            std::move(tools));
}

namespace {

// chat_template_kwargs' thinking / enable_thinking, true when either is truthy (DeepSeek-V3.1's templates read
// "thinking"; vLLM's deepseek_v3 reasoning parser takes either).
bool thinking_requested(const ChatRequest& req) {
  const auto& kw = req.chat_template_kwargs;
  if (!kw.is_object()) return false;
  for (const char* key : {"thinking", "enable_thinking"}) {
    auto it = kw.find(key);
    if (it == kw.end()) continue;
    const Json& v = *it;  // Python's bool(v)
    const bool truthy = v.is_boolean() ? v.get<bool>()
                        : v.is_number() ? v != 0
                        : v.is_string()                   ? !v.get_ref<const std::string&>().empty()
                        : v.is_array() || v.is_object()   ? !v.empty()
                                                          : false;
    if (truthy) return true;
  }
  return false;
}

}  // namespace

ChatParsing chat_parsing_for(const ServerOptions& opts, const ChatRequest& req) {
  ChatParsing p;
  p.reasoning_parser = opts.reasoning_parser;
  if (p.reasoning_parser == "deepseek_v3") p.reasoning_parser = thinking_requested(req) ? "deepseek_r1" : "";
  if (req.tool_choice == "auto") {
    if (!opts.enable_auto_tool_choice || opts.tool_call_parser.empty())
      throw bad_request("\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set",
                        "tool_choice");
    if (!req.tools.is_null()) {
      p.tool_parser = opts.tool_call_parser;
      p.request_tools = req.tools;
    }
  }
  if (req.tool_choice == "required" || req.tool_choice == "named") {
    p.forced_tool_choice = req.tool_choice;
    p.forced_function = req.tool_choice_function;
  }
  return p;
}

}  // namespace vireo::server
