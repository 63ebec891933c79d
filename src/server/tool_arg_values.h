// Helpers of the tool parsers that type a call's argument text by the request's tool schemas
// (qwen3_coder, glm45), as vLLM's parsers do.
#pragma once
#include <optional>
#include <string>

#include "server/json_fields.h"

namespace vireo::server {

// The named function's parameter schemas in a request's tools list: its parameters' "properties" (or the
// parameters object itself when it has none); an empty object when the function or its parameters are
// missing.
Json tool_parameter_schemas(const Json& tools, const std::string& function);

// Python's ast.literal_eval for the literals a model writes, as json.dumps would then write them: numbers,
// strings in either quotes, True / False / None, lists and tuples (arrays), dicts; nullopt for anything else
// (JSON's true / false / null are not Python).
std::optional<Json> python_literal(const std::string& text);

// `text` without leading and trailing spaces, tabs and line breaks.
std::string trim_space(const std::string& text);

}  // namespace vireo::server
