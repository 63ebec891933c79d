// What a request asks its output to be (vLLM's structured_outputs / OpenAI's response_format),
// and its compilation to a grammar, done once per request by the server.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "structured/grammar.h"
#include "structured/vocab_index.h"

namespace vireo::structured {

struct StructuredOutputSpec {
  enum class Kind { kJsonObject, kJsonSchema, kChoice, kRegex };
  Kind kind = Kind::kJsonObject;
  nlohmann::ordered_json schema;     // kJsonSchema
  std::vector<std::string> choices;  // kChoice: the output is exactly one of these strings
  std::string regex;                 // kRegex: the whole output matches it (regex_compiler.h)
};

// Throws SchemaError (json_schema_compiler.h), RegexError (regex_compiler.h) or vireo::Error for a
// spec that cannot be compiled.
std::shared_ptr<const Grammar> compile_structured_output(const StructuredOutputSpec& spec);

// Fills the vocabulary's shared caches that every JSON grammar uses (the string-content
// classification, the bounded-string token profiles: ~130 ms on Qwen3's 151k tokens), so the first
// constrained request does not pay for them in the middle of its output.
void warm_up_json_masks(const std::shared_ptr<const VocabIndex>& vocab);

}  // namespace vireo::structured
