#include "server/tool_choice.h"

#include "server/openai_errors.h"

namespace vireo::server {
namespace {

bool is_named_function(const Json& c) {
  if (!c.is_object() || c.value("type", Json()) != "function") return false;
  auto f = c.find("function");
  return f != c.end() && f->is_object() && f->contains("name") && (*f)["name"].is_string();
}

}  // namespace

std::string parse_tool_choice(const Json& body) {
  auto tools = body.find("tools");
  bool has_tools_field = tools != body.end() && !tools->is_null();
  auto it = body.find("tool_choice");
  if (it == body.end() || it->is_null()) return has_tools_field && !tools->empty() ? "auto" : "none";
  const Json& c = *it;
  if (c == "none") return "none";
  const char* invalid = "Invalid value for `tool_choice`: only \"none\", \"auto\", \"required\" or a named function "
                        "{\"type\": \"function\", \"function\": {\"name\": ...}} are accepted";
  if (!(c == "auto" || c == "required" || is_named_function(c))) throw bad_request(invalid, "tool_choice");
  if (!has_tools_field) throw bad_request("When using `tool_choice`, `tools` must be set.", "tool_choice");
  if (c == "auto") return "auto";
  throw bad_request(std::string("tool_choice ") + (c.is_string() ? "\"required\"" : "naming a function") +
                        " is not supported: vLLM implements it with guided decoding, which Vireo does not have; "
                        "use \"auto\" (with --enable-auto-tool-choice) or \"none\"",
                    "tool_choice");
}

}  // namespace vireo::server
