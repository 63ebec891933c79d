#include "server/structured_output_params.h"

#include <optional>
#include <string>
#include <vector>

#include "server/openai_errors.h"
#include "structured/grammar_cache.h"
#include "structured/json_schema_compiler.h"
#include "structured/regex_compiler.h"

namespace vireo::server {
namespace {

using structured::StructuredOutputSpec;
using Kind = StructuredOutputSpec::Kind;

struct Found {
  StructuredOutputSpec spec;
  std::string param;
};

// guided_json / structured_outputs.json: a schema object, or a JSON text holding one.
StructuredOutputSpec schema_spec(const Json& v, const std::string& param) {
  StructuredOutputSpec s{Kind::kJsonSchema, {}, {}};
  if (v.is_string()) {
    try {
      s.schema = Json::parse(v.get<std::string>());
    } catch (const std::exception&) {
      throw bad_request("'" + param + "' is not valid JSON", param);
    }
    // The body's depth limit never saw this text; the schema compiler recurses per level, so a
    // schema nested thousands deep would overflow the thread's stack.
    if (json_depth(s.schema, kMaxJsonDepth) > kMaxJsonDepth)
      throw bad_request("'" + param + "' is nested deeper than " + std::to_string(kMaxJsonDepth) + " levels", param);
  } else {
    s.schema = v;
  }
  if (!s.schema.is_object() && !s.schema.is_boolean())
    throw bad_request("'" + param + "' must be a JSON schema (an object)", param);
  return s;
}

StructuredOutputSpec choice_spec(const Json& v, const std::string& param) {
  if (!v.is_array() || v.empty()) throw bad_request("'" + param + "' must be a non-empty list of strings", param);
  StructuredOutputSpec s{Kind::kChoice, {}, {}};
  for (const auto& c : v) {
    if (!c.is_string()) throw bad_request("'" + param + "' must be a non-empty list of strings", param);
    s.choices.push_back(c.get<std::string>());
  }
  return s;
}

[[noreturn]] void refuse(const std::string& what, const std::string& param) {
  throw bad_request(what + " is not supported by Vireo's structured outputs (JSON schema, json_object, choice and regex are)",
                    param);
}

StructuredOutputSpec regex_spec(const Json& v, const std::string& param) {
  if (!v.is_string()) throw bad_request("'" + param + "' must be a string (a regular expression)", param);
  StructuredOutputSpec s{Kind::kRegex, {}, {}};
  s.regex = v.get<std::string>();
  return s;
}

std::optional<Found> from_response_format(const Json& body) {
  if (!has_field(body, "response_format")) return std::nullopt;
  const Json& rf = body["response_format"];
  const std::string param = "response_format";
  if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string())
    throw bad_request("'response_format' must be an object with a string 'type'", param);
  const std::string type = rf["type"].get<std::string>();
  if (type == "text") return std::nullopt;
  if (type == "json_object") return Found{{Kind::kJsonObject, {}, {}}, param};
  if (type == "json_schema") {
    auto js = rf.find("json_schema");
    if (js == rf.end() || !js->is_object())
      throw bad_request("response_format of type 'json_schema' needs a 'json_schema' object", param);
    if (auto name = js->find("name"); name != js->end() && !name->is_string())
      throw bad_request("'response_format.json_schema.name' must be a string", param);
    auto schema = js->find("schema");
    if (schema == js->end() || schema->is_null())
      throw bad_request("'response_format.json_schema.schema' is required", param);
    return Found{schema_spec(*schema, param), param};
  }
  if (type == "structural_tag") refuse("response_format type 'structural_tag'", param);
  throw bad_request("response_format type '" + type + "' is not one of 'text', 'json_object', 'json_schema'", param);
}

void add_structured_outputs(const Json& body, std::vector<Found>& found) {
  if (!has_field(body, "structured_outputs")) return;
  const Json& so = body["structured_outputs"];
  const std::string param = "structured_outputs";
  if (!so.is_object()) throw bad_request("'structured_outputs' must be an object", param);
  if (has_field(so, "json")) found.push_back({schema_spec(so["json"], param), param});
  if (has_field(so, "choice")) found.push_back({choice_spec(so["choice"], param), param});
  if (has_field(so, "json_object")) {
    if (!so["json_object"].is_boolean()) throw bad_request("'structured_outputs.json_object' must be a boolean", param);
    if (so["json_object"].get<bool>()) found.push_back({{Kind::kJsonObject, {}, {}}, param});
  }
  if (has_field(so, "regex")) found.push_back({regex_spec(so["regex"], param), param});
  if (has_field(so, "grammar")) refuse("structured_outputs.grammar (EBNF)", param);
  if (has_field(so, "structural_tag")) refuse("structured_outputs.structural_tag", param);
}

}  // namespace

std::shared_ptr<const structured::Grammar> compile_for_request(const StructuredOutputSpec& spec, const std::string& param) {
  try {
    return structured::GrammarCache::global().get(spec);  // a response format seen before: no compilation
  } catch (const structured::SchemaError& e) {
    throw bad_request(std::string("Invalid JSON schema: ") + e.what(), param);
  } catch (const structured::RegexError& e) {
    throw bad_request(std::string("Invalid regular expression: ") + e.what(), param);
  } catch (const std::exception& e) {
    throw bad_request(std::string("Cannot compile the structured output: ") + e.what(), param);
  }
}

std::shared_ptr<const structured::Grammar> parse_structured_outputs(const Json& body) {
  std::vector<Found> found;
  if (auto rf = from_response_format(body)) found.push_back(std::move(*rf));
  add_structured_outputs(body, found);
  if (has_field(body, "guided_json")) found.push_back({schema_spec(body["guided_json"], "guided_json"), "guided_json"});
  if (has_field(body, "guided_choice")) found.push_back({choice_spec(body["guided_choice"], "guided_choice"), "guided_choice"});
  if (has_field(body, "guided_regex")) found.push_back({regex_spec(body["guided_regex"], "guided_regex"), "guided_regex"});
  if (has_field(body, "guided_grammar")) refuse("guided_grammar (EBNF)", "guided_grammar");
  if (has_field(body, "guided_json_object") && body["guided_json_object"] == true)
    found.push_back({{Kind::kJsonObject, {}, {}}, "guided_json_object"});
  get_string(body, "guided_decoding_backend");    // accepted, type-checked; there is one backend
  get_string(body, "guided_whitespace_pattern");  // accepted, type-checked; whitespace is bounded (json_prelude.h)
  if (found.empty()) return nullptr;
  if (found.size() > 1)
    throw bad_request("You can only use one kind of structured outputs constraint, got several (" + found[0].param +
                          ", " + found[1].param + ")",
                      found[1].param);
  return compile_for_request(found[0].spec, found[0].param);
}

}  // namespace vireo::server
