// The request's tool_choice, checked as vLLM's ChatCompletionRequest does: absent means "auto"
// when tools are given, else "none". "required" and a named function are implemented as vLLM does,
// with structured outputs: a named function's output is its arguments object (the function's
// `parameters` schema); "required" makes the output a JSON array of {"name", "parameters"} calls,
// at least one (exactly one with parallel_tool_calls false), each naming one of the tools.
#pragma once
#include <memory>
#include <string>

#include "server/json_fields.h"
#include "structured/grammar.h"

namespace vireo::server {

struct ToolChoice {
  std::string mode = "none";  // "none" | "auto" | "required" | "named"
  std::string function;       // "named": the function's name
  bool parallel = true;       // parallel_tool_calls: false limits "required" to one call (vLLM's maxItems 1)
};

// Throws ApiError 400 (param "tool_choice").
ToolChoice parse_tool_choice(const Json& body);

// The grammar for tool_choice "required" or "named" over `tools` (a validated list); null otherwise.
// Throws ApiError 400 when the named function is not among the tools or a schema is unusable.
std::shared_ptr<const structured::Grammar> tool_choice_grammar(const ToolChoice& choice, const Json& tools);

}  // namespace vireo::server
