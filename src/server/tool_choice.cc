#include "server/tool_choice.h"

#include "server/openai_errors.h"
#include "server/structured_output_params.h"

namespace vireo::server {
namespace {

bool is_named_function(const Json& c) {
  if (!c.is_object() || c.value("type", Json()) != "function") return false;
  auto f = c.find("function");
  return f != c.end() && f->is_object() && f->contains("name") && (*f)["name"].is_string();
}

// A tool's parameters; missing ones are generated as {} (vLLM).
Json parameters_of(const Json& tool) {
  const Json& f = tool["function"];
  auto p = f.find("parameters");
  if (p == f.end() || p->is_null() || p->empty()) return Json{{"type", "object"}, {"properties", Json::object()}};
  return *p;
}

// vLLM's schema for "required" (protocol.py, _get_json_schema_from_tool): the tools' $defs are
// hoisted to the root, so their "#/$defs/..." references still resolve.
Json required_schema(const Json& tools, bool parallel) {
  Json any_of = Json::array();
  Json defs = Json::object();
  for (const auto& tool : tools) {
    Json params = parameters_of(tool);
    if (auto d = params.find("$defs"); d != params.end()) {
      if (!d->is_object()) throw bad_request("a tool's parameters.$defs must be an object", "tools");
      for (const auto& [name, def] : d->items()) {
        if (defs.contains(name) && defs[name] != def)
          throw bad_request("Tool definition '" + name + "' has multiple schemas, which is not supported.", "tools");
        defs[name] = def;
      }
      params.erase("$defs");
    }
    const std::string name = tool["function"]["name"].get<std::string>();
    any_of.push_back({{"properties", {{"name", {{"type", "string"}, {"enum", {name}}}}, {"parameters", params}}},
                      {"required", {"name", "parameters"}}});
  }
  Json schema = {{"type", "array"}, {"minItems", 1}, {"items", {{"type", "object"}, {"anyOf", any_of}}}};
  if (!parallel) schema["maxItems"] = 1;
  if (!defs.empty()) schema["$defs"] = defs;
  return schema;
}

}  // namespace

ToolChoice parse_tool_choice(const Json& body) {
  auto tools = body.find("tools");
  bool has_tools_field = tools != body.end() && !tools->is_null();
  auto it = body.find("tool_choice");
  ToolChoice out;
  if (it == body.end() || it->is_null()) {
    out.mode = has_tools_field && !tools->empty() ? "auto" : "none";
    return out;
  }
  const Json& c = *it;
  out.parallel = get_bool(body, "parallel_tool_calls").value_or(true);
  if (c == "none") return out;
  const char* invalid = "Invalid value for `tool_choice`: only \"none\", \"auto\", \"required\" or a named function "
                        "{\"type\": \"function\", \"function\": {\"name\": ...}} are accepted";
  if (!(c == "auto" || c == "required" || is_named_function(c))) throw bad_request(invalid, "tool_choice");
  if (!has_tools_field) throw bad_request("When using `tool_choice`, `tools` must be set.", "tool_choice");
  if (c.is_string()) {
    out.mode = c.get<std::string>();
  } else {
    out.mode = "named";
    out.function = c["function"]["name"].get<std::string>();
  }
  return out;
}

std::shared_ptr<const structured::Grammar> tool_choice_grammar(const ToolChoice& choice, const Json& tools) {
  using structured::StructuredOutputSpec;
  if (choice.mode != "required" && choice.mode != "named") return nullptr;
  if (!tools.is_array() || tools.empty())
    throw bad_request("tool_choice \"" + choice.mode + "\" needs a non-empty `tools` list", "tool_choice");
  StructuredOutputSpec spec{StructuredOutputSpec::Kind::kJsonSchema, {}, {}};
  if (choice.mode == "required") {
    spec.schema = required_schema(tools, choice.parallel);
  } else {
    const Json* tool = nullptr;
    for (const auto& t : tools)
      if (t["function"]["name"] == choice.function) tool = &t;
    if (!tool) throw bad_request("Tool '" + choice.function + "' has not been passed in `tools`.", "tool_choice");
    spec.schema = parameters_of(*tool);
  }
  return compile_for_request(spec, "tools");
}

}  // namespace vireo::server
