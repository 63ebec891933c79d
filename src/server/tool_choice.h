// The request's tool_choice, checked as vLLM's ChatCompletionRequest does: absent means "auto"
// when tools are given, else "none"; "required" and a named function are refused (400), since
// vLLM implements them with guided decoding, which Vireo does not have.
#pragma once
#include <string>

#include "server/json_fields.h"

namespace vireo::server {

// Returns "none" or "auto"; throws ApiError 400 (param "tool_choice") otherwise.
std::string parse_tool_choice(const Json& body);

}  // namespace vireo::server
