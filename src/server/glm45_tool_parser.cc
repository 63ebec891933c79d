// glm45 (GLM-4.5 / 4.6 / 4.7): each call is a block
//   <tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>
// The function's name is the block's first line; each <arg_key> / <arg_value> pair (spaces around both
// trimmed) is an argument. As vLLM's Glm4MoeModelToolParser: a value whose schema type is "string" stays
// text; any other is read as JSON, then as a JSON string's escaped contents holding JSON, then as a Python
// literal, else kept as text. A block without a name is given back as content, tags included; one with no
// line break is a call without arguments (vLLM fails the whole output there).
#include <memory>
#include <string>

#include "server/tagged_block_tool_parser.h"
#include "server/tool_arg_values.h"

namespace vireo::server {
namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";
constexpr std::string_view kKey = "<arg_key>", kKeyEnd = "</arg_key>";
constexpr std::string_view kValue = "<arg_value>", kValueEnd = "</arg_value>";

Json deserialize(const std::string& value) {
  Json v = Json::parse(value, nullptr, false);
  if (!v.is_discarded()) return v;
  Json wrapped = Json::parse("\"" + value + "\"", nullptr, false);  // escaped JSON inside a string
  if (wrapped.is_string()) {
    v = Json::parse(wrapped.get<std::string>(), nullptr, false);
    if (!v.is_discarded()) return v;
  }
  return python_literal(value).value_or(Json(value));
}

class Glm45ToolParser : public TaggedBlockToolParser {
 public:
  explicit Glm45ToolParser(Json tools) : TaggedBlockToolParser(kOpen, kClose), tools_(std::move(tools)) {}

 private:
  void close_block(const std::string& body, bool closed, ToolDelta& out) const override {
    const size_t nl = body.find('\n');
    const std::string name = trim_space(body.substr(0, nl));
    if (name.empty() || name.find('<') != std::string::npos) {
      give_back(body, closed, out);
      return;
    }
    const Json schemas = tool_parameter_schemas(tools_, name);
    Json args = Json::object();
    for (size_t at = nl == std::string::npos ? body.size() : body.find(kKey, nl); at != std::string::npos;) {
      const size_t ks = at + kKey.size(), ke = body.find(kKeyEnd, ks);
      if (ke == std::string::npos) break;
      // The value must follow its key with only white space between (else vLLM's regex skips the key).
      const size_t vs = body.find(kValue, ke + kKeyEnd.size());
      if (vs == std::string::npos) break;
      const size_t ve = body.find(kValueEnd, vs + kValue.size());
      if (ve == std::string::npos) break;
      if (!trim_space(body.substr(ke + kKeyEnd.size(), vs - ke - kKeyEnd.size())).empty()) {
        at = body.find(kKey, ke + kKeyEnd.size());
        continue;
      }
      const std::string key = trim_space(body.substr(ks, ke - ks));
      const std::string value = trim_space(body.substr(vs + kValue.size(), ve - vs - kValue.size()));
      const bool text = schemas.is_object() && schemas.contains(key) && schemas[key].is_object() &&
                        schemas[key].value("type", Json()) == "string";
      args[key] = text ? Json(value) : deserialize(value);
      at = body.find(kKey, ve + kValueEnd.size());
    }
    out.calls.push_back({name, dump_json(args)});
  }

  Json tools_;
};

}  // namespace

std::unique_ptr<ToolParser> make_glm45_tool_parser(const Json& tools) { return std::make_unique<Glm45ToolParser>(tools); }

}  // namespace vireo::server
