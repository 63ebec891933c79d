#include "server/tool_arg_values.h"

#include <cctype>
#include <cstring>
#include <string_view>
#include <utility>

namespace vireo::server {

std::string trim_space(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

namespace {

// A recursive-descent reader of Python literals over `s` from `i`: numbers, strings ('...' / "..." with the
// common escapes), True / False / None, lists and tuples (-> arrays), dicts (keys written as JSON keys).
class PythonLiteralReader {
 public:
  explicit PythonLiteralReader(const std::string& s) : s_(s) {}
  std::optional<Json> read_all() {
    auto v = value(0);
    skip();
    if (!v || i_ != s_.size()) return std::nullopt;
    return v;
  }

 private:
  void skip() {
    while (i_ < s_.size() && std::string_view(" \t\r\n").find(s_[i_]) != std::string_view::npos) ++i_;
  }
  bool eat(char c) {
    skip();
    if (i_ < s_.size() && s_[i_] == c) return ++i_, true;
    return false;
  }
  std::optional<Json> value(int depth) {
    if (depth > 64) return std::nullopt;
    skip();
    if (i_ >= s_.size()) return std::nullopt;
    const char c = s_[i_];
    if (c == '\'' || c == '"') return string();
    if (c == '[' || c == '(') return sequence(c == '[' ? ']' : ')', depth);
    if (c == '{') return dict(depth);
    for (auto [word, v] : {std::pair<const char*, Json>{"True", true}, {"False", false}, {"None", nullptr}})
      if (s_.compare(i_, std::strlen(word), word) == 0) {
        i_ += std::strlen(word);
        return v;
      }
    return number();
  }
  std::optional<Json> string() {
    const char q = s_[i_++];
    std::string out;
    while (i_ < s_.size() && s_[i_] != q) {
      char c = s_[i_++];
      if (c == '\\' && i_ < s_.size()) {
        const char e = s_[i_++];
        c = e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e == '0' ? '\0' : e;
      }
      out += c;
    }
    if (i_ >= s_.size()) return std::nullopt;
    ++i_;
    return Json(out);
  }
  std::optional<Json> sequence(char close, int depth) {
    ++i_;
    Json out = Json::array();
    while (!eat(close)) {
      auto v = value(depth + 1);
      if (!v) return std::nullopt;
      out.push_back(std::move(*v));
      if (!eat(',') && !(skip(), i_ < s_.size() && s_[i_] == close)) return std::nullopt;
    }
    return out;
  }
  std::optional<Json> dict(int depth) {
    ++i_;
    Json out = Json::object();
    while (!eat('}')) {
      auto k = value(depth + 1);
      if (!k || (!k->is_string() && !k->is_number() && !k->is_boolean() && !k->is_null()) || !eat(':')) return std::nullopt;
      auto v = value(depth + 1);
      if (!v) return std::nullopt;
      // json.dumps writes non-string keys as JSON text (1 -> "1", True -> "true", None -> "null").
      out[k->is_string() ? k->get<std::string>() : k->dump()] = std::move(*v);
      if (!eat(',') && !(skip(), i_ < s_.size() && s_[i_] == '}')) return std::nullopt;
    }
    return out;
  }
  std::optional<Json> number() {
    const size_t b = i_;
    if (i_ < s_.size() && (s_[i_] == '-' || s_[i_] == '+')) ++i_;
    while (i_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[i_])) || s_[i_] == '.' || s_[i_] == 'e' ||
                              s_[i_] == 'E' || ((s_[i_] == '-' || s_[i_] == '+') && (s_[i_ - 1] == 'e' || s_[i_ - 1] == 'E'))))
      ++i_;
    std::string t = s_.substr(b, i_ - b);
    if (!t.empty() && t[0] == '+') t.erase(0, 1);
    if (t.empty() || t == "-") return std::nullopt;
    if (t.size() > 1 && t[t.size() - 1] == '.') t += "0";  // Python's "1." is 1.0
    if (t[0] == '.' || (t[0] == '-' && t.size() > 1 && t[1] == '.')) t.insert(t[0] == '-' ? 1 : 0, "0");
    Json v = Json::parse(t, nullptr, false);
    if (v.is_discarded() || !v.is_number()) return std::nullopt;
    return v;
  }

  const std::string& s_;
  size_t i_ = 0;
};

}  // namespace

std::optional<Json> python_literal(const std::string& text) { return PythonLiteralReader(text).read_all(); }

Json tool_parameter_schemas(const Json& tools, const std::string& function) {
  if (!tools.is_array()) return Json::object();
  for (const Json& t : tools) {
    if (!t.is_object() || t.value("type", "") != "function" || !t.contains("function")) continue;
    const Json& f = t["function"];
    if (!f.is_object() || !f.contains("name") || f["name"] != function) continue;
    if (!f.contains("parameters") || !f["parameters"].is_object()) return Json::object();
    const Json& params = f["parameters"];
    return params.contains("properties") ? params["properties"] : params;
  }
  return Json::object();
}

}  // namespace vireo::server
