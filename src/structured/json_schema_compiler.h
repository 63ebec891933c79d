// JSON Schema -> Grammar, for the subset vLLM users rely on (xgrammar's behaviour where the schema
// leaves a choice): type (one or a list), properties in schema order (required ones always,
// optional ones may be skipped), required, additionalProperties (absent next to `properties`:
// none generated), items, prefixItems, minItems / maxItems, enum, const, anyOf / oneOf, allOf of
// one schema, $ref into the same document, minLength / maxLength, pattern (regex_compiler.h: the
// whole string, without characters that would need escaping), integer ranges (exact when small,
// otherwise only their sign), and the sign of number bounds. Annotations (title,
// description, format, default, examples, ...) are ignored; keywords that would constrain the
// output in ways not implemented (not, uniqueItems, patternProperties, ...) are refused with SchemaError.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "structured/grammar.h"

namespace vireo::structured {

using SchemaJson = nlohmann::ordered_json;

// An unusable schema; `path` is the JSON pointer of the offending subschema ("" = the root).
struct SchemaError : Error {
  SchemaError(const std::string& message, std::string path)
      : Error(path.empty() ? message : message + " (at " + path + ")"), path(std::move(path)) {}
  std::string path;
};

Grammar compile_json_schema(const SchemaJson& schema);
// Any JSON object (response_format json_object).
Grammar json_object_grammar();

}  // namespace vireo::structured
