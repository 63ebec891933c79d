// qwen3_coder (Qwen3-Coder, Qwen3.5 / Qwen3.6): each call is an XML-style block
//   <tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>
// A parameter's text (one leading and one trailing newline dropped) becomes a JSON value by the type the
// request's tool schema gives it, as vLLM's Qwen3CoderToolParser converts it: string-like types and
// parameters the schema does not name stay strings; "null" is null for any type; int* / uint* / long* /
// short* / unsigned* parse as integers and num* / float* as numbers (integral values as integers), or stay
// strings; boolean / bool / binary are true iff the text is "true" (any case); object / array / dict* /
// list* parse as JSON; other types try a Python literal (numbers, quoted strings, lists, dicts, True /
// False / None), else stay strings. A block may hold several functions; one without any is given back as
// content, tags included. Calls are released whole when their block closes (or the output ends).
// seed_oss (Seed-OSS) writes the same functions inside <seed:tool_call>...</seed:tool_call> blocks and types
// them the same way (vLLM's SeedOssToolParser).
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/tagged_block_tool_parser.h"
#include "server/tool_arg_values.h"

namespace vireo::server {
namespace {

constexpr std::string_view kFunction = "<function=", kFunctionEnd = "</function>";
constexpr std::string_view kParameter = "<parameter=", kParameterEnd = "</parameter>";

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool starts_with(const std::string& s, std::string_view p) { return s.rfind(p, 0) == 0; }

// Python's int(text): optional sign, digits (underscores between them allowed), surrounding whitespace.
std::optional<Json> as_int(const std::string& text) {
  std::string t = trim_space(text), digits;
  size_t i = t.empty() || (t[0] != '+' && t[0] != '-') ? 0 : 1;
  if (i == t.size()) return std::nullopt;
  for (; i < t.size(); ++i) {
    if (std::isdigit(static_cast<unsigned char>(t[i]))) digits += t[i];
    else if (t[i] != '_' || digits.empty() || i + 1 == t.size() || t[i + 1] == '_') return std::nullopt;
  }
  Json v = Json::parse((t[0] == '-' ? "-" : "") + digits, nullptr, false);
  return v.is_discarded() ? std::nullopt : std::optional<Json>(v);
}

// Python's float(text), integral values as integers; inf / nan stay strings (int() of them raises).
std::optional<Json> as_number(const std::string& text) {
  const std::string t = trim_space(text);
  if (t.empty()) return std::nullopt;
  if (t.find_first_of("xXpP") != std::string::npos) return std::nullopt;  // strtod's hex floats are not Python's
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size() || !std::isfinite(v)) return std::nullopt;
  // (range first: casting a double past long long's range is undefined)
  if (std::abs(v) < 9.2e18 && v == static_cast<double>(static_cast<long long>(v))) return Json(static_cast<long long>(v));
  return Json(v);
}

Json convert(const std::string& value, const std::string& name, const Json& properties) {
  if (lower(value) == "null") return nullptr;
  auto p = properties.is_object() ? properties.find(name) : properties.end();
  if (!properties.is_object() || p == properties.end()) return value;
  std::string type = "string";
  if (p->is_object() && p->contains("type")) {
    const Json& t = (*p)["type"];
    type = lower(trim_space(t.is_string() ? t.get<std::string>() : t.dump()));
  }
  for (const char* s : {"string", "str", "text", "varchar", "char", "enum"})
    if (type == s) return value;
  for (const char* s : {"int", "uint", "long", "short", "unsigned"})
    if (starts_with(type, s)) return as_int(value).value_or(Json(value));
  if (starts_with(type, "num") || starts_with(type, "float")) return as_number(value).value_or(Json(value));
  if (type == "boolean" || type == "bool" || type == "binary") return lower(value) == "true";
  if (type == "object" || type == "array" || type == "arr" || starts_with(type, "dict") || starts_with(type, "list")) {
    Json v = Json::parse(value, nullptr, false);
    if (!v.is_discarded()) return v;
  }
  return python_literal(value).value_or(Json(value));
}

class Qwen3CoderToolParser : public TaggedBlockToolParser {
 public:
  // open / close: the block's tags (string literals).
  Qwen3CoderToolParser(Json tools, std::string_view open, std::string_view close)
      : TaggedBlockToolParser(open, close), tools_(std::move(tools)) {}

 private:
  void close_block(const std::string& body, bool closed, ToolDelta& out) const override {
    std::vector<ToolCall> calls;
    for (size_t at = body.find(kFunction); at != std::string::npos; at = body.find(kFunction, at)) {
      const size_t start = at + kFunction.size();
      size_t end = body.find(kFunctionEnd, start);
      const std::string fn = body.substr(start, end == std::string::npos ? std::string::npos : end - start);
      at = end == std::string::npos ? body.size() : end + kFunctionEnd.size();
      const size_t gt = fn.find('>');
      if (gt == std::string::npos || gt == 0) continue;
      ToolCall call{fn.substr(0, gt), ""};
      const Json properties = tool_parameter_schemas(tools_, call.name);
      Json args = Json::object();
      // A parameter ends at </parameter>, at the next <parameter=, or at the function's end.
      for (size_t p = fn.find(kParameter, gt); p != std::string::npos;) {
        const size_t ps = p + kParameter.size();
        const size_t next = fn.find(kParameter, ps), close = fn.find(kParameterEnd, ps);
        const size_t stop = std::min(next, close);
        std::string param = fn.substr(ps, stop == std::string::npos ? std::string::npos : stop - ps);
        p = next;
        const size_t pgt = param.find('>');
        if (pgt == std::string::npos) continue;
        std::string value = param.substr(pgt + 1);
        if (starts_with(value, "\n")) value.erase(0, 1);
        if (!value.empty() && value.back() == '\n') value.pop_back();
        const std::string name = param.substr(0, pgt);
        args[name] = convert(value, name, properties);
      }
      call.arguments = dump_json(args);
      calls.push_back(std::move(call));
    }
    if (calls.empty()) {
      give_back(body, closed, out);
      return;
    }
    for (auto& c : calls) out.calls.push_back(std::move(c));
  }

  Json tools_;
};

}  // namespace

std::unique_ptr<ToolParser> make_qwen3_coder_tool_parser(const Json& tools) {
  return std::make_unique<Qwen3CoderToolParser>(tools, "<tool_call>", "</tool_call>");
}

std::unique_ptr<ToolParser> make_seed_oss_tool_parser(const Json& tools) {
  return std::make_unique<Qwen3CoderToolParser>(tools, "<seed:tool_call>", "</seed:tool_call>");
}

}  // namespace vireo::server
