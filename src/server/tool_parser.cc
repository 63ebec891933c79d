#include "server/tool_parser.h"

#include <utility>

#include "core/error.h"

namespace vireo::server {

// Defined in <name>_tool_parser.cc. An explicit table, not self-registration: the linker drops
// static-library objects nothing references. Adding a parser is its file plus one line here.
std::unique_ptr<ToolParser> make_hermes_tool_parser();
std::unique_ptr<ToolParser> make_llama3_json_tool_parser();
std::unique_ptr<ToolParser> make_harmony_tool_parser();  // "openai" (GPT-OSS)
std::unique_ptr<ToolParser> make_qwen3_coder_tool_parser(const Json& tools);  // types parameters by the schemas
std::unique_ptr<ToolParser> make_glm45_tool_parser(const Json& tools);        // the same
std::unique_ptr<ToolParser> make_deepseek_tool_parser();
std::unique_ptr<ToolParser> make_granite_tool_parser();
std::unique_ptr<ToolParser> make_hunyuan_tool_parser();
std::unique_ptr<ToolParser> make_seed_oss_tool_parser(const Json& tools);  // qwen3_coder's functions, Seed's tags  // deepseek_v3 and deepseek_v31: one reads both forms

namespace {

using Factory = std::unique_ptr<ToolParser> (*)(const Json& tools);
const std::pair<const char*, Factory> kParsers[] = {
    {"deepseek_v3", [](const Json&) { return make_deepseek_tool_parser(); }},
    {"deepseek_v31", [](const Json&) { return make_deepseek_tool_parser(); }},
    {"glm45", make_glm45_tool_parser},
    {"granite", [](const Json&) { return make_granite_tool_parser(); }},
    {"hermes", [](const Json&) { return make_hermes_tool_parser(); }},
    {"hunyuan_a13b", [](const Json&) { return make_hunyuan_tool_parser(); }},
    {"llama3_json", [](const Json&) { return make_llama3_json_tool_parser(); }},
    {"openai", [](const Json&) { return make_harmony_tool_parser(); }},
    {"qwen3_coder", make_qwen3_coder_tool_parser},
    {"seed_oss", make_seed_oss_tool_parser},
};

}  // namespace

ToolDelta ToolParser::parse_all(std::string_view text) {
  ToolDelta out = feed(text);
  out.append(finish());
  return out;
}

std::optional<ToolCall> tool_call_from_json(const Json& j) {
  if (!j.is_object()) return std::nullopt;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get_ref<const std::string&>().empty()) return std::nullopt;
  auto args = j.find("arguments");
  if (args == j.end()) args = j.find("parameters");  // Llama 3.x writes "parameters"
  ToolCall call{name->get<std::string>(), "{}"};
  if (args != j.end() && !args->is_null()) call.arguments = args->is_string() ? args->get<std::string>() : dump_json(*args);
  return call;
}

std::unique_ptr<ToolParser> make_tool_parser(const std::string& name, const Json& tools) {
  for (const auto& [n, make] : kParsers)
    if (name == n) return make(tools);
  throw Error("unknown tool call parser '" + name + "'");
}

std::vector<std::string> tool_parser_names() {
  std::vector<std::string> out;
  for (const auto& p : kParsers) out.push_back(p.first);
  return out;
}

}  // namespace vireo::server
