// The request fields that ask for structured outputs (guided decoding), as vLLM accepts them:
// OpenAI's response_format (json_object, json_schema), vLLM's structured_outputs {json, choice,
// json_object, regex, grammar, ...} and the legacy guided_json / guided_choice / guided_regex /
// guided_grammar. At most one constraint per request; EBNF grammars and structural tags are refused
// (400), as is a schema or regex the compilers cannot honour.
#pragma once
#include <memory>

#include "server/json_fields.h"
#include "structured/structured_output.h"

namespace vireo::server {

// The compiled grammar, or null when the request asks for free text. Throws ApiError 400.
std::shared_ptr<const structured::Grammar> parse_structured_outputs(const Json& body);

// Compiles `spec` or takes it from the process's grammar cache (src/structured/grammar_cache.h); a
// schema the compiler refuses is a 400 naming `param`.
std::shared_ptr<const structured::Grammar> compile_for_request(const structured::StructuredOutputSpec& spec,
                                                              const std::string& param);

}  // namespace vireo::server
