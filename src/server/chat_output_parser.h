// A chat choice's generated text -> reasoning, content and tool calls: the reasoning parser
// splits off <think>...</think> first, then the tool parser reads the content part (Qwen3 thinks,
// then calls tools). Which parsers a request gets is fixed once, when it is validated
// (ChatParsing), so a refused tool_choice is a 400 before any engine work.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "server/reasoning_parser.h"
#include "server/request_types.h"
#include "server/server_context.h"
#include "server/tool_parser.h"

namespace vireo::server {

struct ChatDelta {
  std::string reasoning;
  std::string content;
  std::vector<ToolCall> calls;
  void append(ChatDelta d);
};

class ChatOutputParser {
 public:
  // Either parser may be null (that stage passes the text through).
  ChatOutputParser(std::unique_ptr<ReasoningParser> reasoning, std::unique_ptr<ToolParser> tools)
      : reasoning_(std::move(reasoning)), tools_(std::move(tools)) {}
  ChatDelta feed(std::string_view text);
  ChatDelta finish();
  ChatDelta parse_all(std::string_view text);

 private:
  ChatDelta tool_stage(ReasoningDelta r, bool last);
  std::unique_ptr<ReasoningParser> reasoning_;
  std::unique_ptr<ToolParser> tools_;
};

// One engine output's text through `parser` (finish() too on the last one); all content without a parser.
ChatDelta parse_output_step(ChatOutputParser* parser, std::string_view text, bool finished);

struct ChatParsing {
  std::string reasoning_parser;  // "" = none
  std::string tool_parser;       // "" = no tool-call parsing for this request
  Json request_tools;            // the request's tools, for parsers that read their schemas (qwen3_coder)
  // tool_choice "required" / "named" (the output is the grammar's JSON, forced_tool_parser.h).
  std::string forced_tool_choice;
  std::string forced_function;
  bool active() const { return !reasoning_parser.empty() || !tool_parser.empty() || !forced_tool_choice.empty(); }
  std::unique_ptr<ChatOutputParser> make() const;
  // The choice's finish_reason: "tool_calls" when calls were found, except for a named function,
  // whose finish_reason stays the engine's (vLLM).
  std::string finish_reason(bool has_calls, const std::string& engine_reason) const {
    return has_calls && forced_tool_choice != "named" ? "tool_calls" : engine_reason;
  }
};

// The server's --reasoning-parser, and its --tool-call-parser when the request's tool_choice is
// "auto" and it has tools; "required" and named functions read the constrained JSON instead. tool_choice "auto" without --enable-auto-tool-choice and
// --tool-call-parser is a 400, as in vLLM.
ChatParsing chat_parsing_for(const ServerOptions& opts, const ChatRequest& req);

}  // namespace vireo::server
