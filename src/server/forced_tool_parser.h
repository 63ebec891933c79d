// Tool calls from an output constrained by tool_choice "required" or a named function (the grammar
// came from tool_choice_grammar): the whole output is JSON, read once it is complete, so a stream
// sends the calls with the final chunk. Named: the output is the arguments object of that function
// (a call even when cut short by max_tokens, as vLLM returns it). Required: a JSON array of
// {"name", "parameters"}; an output that does not parse (cut short) is given back as content.
#pragma once
#include <memory>
#include <string>

#include "server/tool_parser.h"

namespace vireo::server {

// mode: "required" or "named" (function: the name).
std::unique_ptr<ToolParser> make_forced_tool_parser(const std::string& mode, const std::string& function);

}  // namespace vireo::server
