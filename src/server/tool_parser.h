// --tool-call-parser (vLLM's names): finds the tool calls a model wrote into its answer. Same
// streaming shape as ReasoningParser: feed() pieces of the content, get back the content that is
// certainly not part of a call plus every call completed so far; finish() releases the rest.
// A call that does not parse (malformed JSON, no name) is given back as plain content.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/json_fields.h"

namespace vireo::server {

struct ToolCall {
  std::string name;
  std::string arguments;  // a JSON text, as OpenAI's function.arguments
  bool operator==(const ToolCall&) const = default;
};

struct ToolDelta {
  std::string content;
  std::vector<ToolCall> calls;
  void append(ToolDelta d) {
    content += d.content;
    for (auto& c : d.calls) calls.push_back(std::move(c));
  }
};

class ToolParser {
 public:
  virtual ~ToolParser() = default;
  virtual ToolDelta feed(std::string_view text) = 0;
  virtual ToolDelta finish() = 0;
  ToolDelta parse_all(std::string_view text);
};

// {"name": "...", "arguments"|"parameters": {...}} -> a call; nullopt when it is not one.
// Arguments that are already a string are kept as they are; a missing one is "{}".
std::optional<ToolCall> tool_call_from_json(const Json& j);

// By --tool-call-parser name; throws vireo::Error for an unknown name. tools: the request's tools list
// (qwen3_coder types each parameter by its schema there; the others ignore it).
std::unique_ptr<ToolParser> make_tool_parser(const std::string& name, const Json& tools = Json());
std::vector<std::string> tool_parser_names();

}  // namespace vireo::server
