// A small JSON-schema validator for the subset json_schema_compiler supports: the oracle the
// random walks check their outputs against.
#pragma once
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

namespace vireo::structured::testing {

using Js = nlohmann::ordered_json;

inline size_t utf8_length(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

inline bool validate(const Js& v, const Js& s, const Js& root);

inline bool validate_type(const Js& v, const std::string& t, const Js& s, const Js& root) {
  if (t == "null") return v.is_null();
  if (t == "boolean") return v.is_boolean();
  if (t == "integer" || t == "number") {
    if (!v.is_number()) return false;
    if (t == "integer" && !v.is_number_integer() && !v.is_number_unsigned()) return false;
    const double x = v.get<double>();
    if (s.contains("minimum") && x < s["minimum"].get<double>()) return false;
    if (s.contains("maximum") && t == "integer" && x > s["maximum"].get<double>()) return false;
    return true;
  }
  if (t == "string") {
    if (!v.is_string()) return false;
    const size_t n = utf8_length(v.get<std::string>());
    if (s.contains("minLength") && n < s["minLength"].get<size_t>()) return false;
    if (s.contains("maxLength") && n > s["maxLength"].get<size_t>()) return false;
    return true;
  }
  if (t == "array") {
    if (!v.is_array()) return false;
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return false;
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return false;
    size_t np = 0;
    if (s.contains("prefixItems")) {
      np = s["prefixItems"].size();
      for (size_t i = 0; i < std::min(np, v.size()); ++i)
        if (!validate(v[i], s["prefixItems"][i], root)) return false;
    }
    for (size_t i = np; i < v.size(); ++i) {
      if (s.contains("items") && !validate(v[i], s["items"], root)) return false;
    }
    return true;
  }
  if (t == "object") {
    if (!v.is_object()) return false;
    const Js props = s.value("properties", Js::object());
    for (const auto& r : s.value("required", Js::array()))
      if (!v.contains(r.get<std::string>())) return false;
    const Js extra = s.contains("additionalProperties") ? s["additionalProperties"] : Js(!s.contains("properties"));
    for (const auto& [k, x] : v.items()) {
      if (props.contains(k)) {
        if (!validate(x, props[k], root)) return false;
      } else if (extra.is_boolean()) {
        if (!extra.get<bool>()) return false;
      } else if (!validate(x, extra, root)) {
        return false;
      }
    }
    return true;
  }
  return false;
}

inline bool validate(const Js& v, const Js& s, const Js& root) {
  if (s.is_boolean()) return s.get<bool>();
  if (s.contains("$ref")) return validate(v, root.at(Js::json_pointer(s["$ref"].get<std::string>().substr(1))), root);
  if (s.contains("const")) return v == s["const"];
  if (s.contains("enum")) return std::find(s["enum"].begin(), s["enum"].end(), v) != s["enum"].end();
  for (const char* key : {"anyOf", "oneOf"}) {
    if (!s.contains(key)) continue;
    for (const auto& b : s[key]) {
      Js m = b;
      for (const auto& [k, x] : s.items())
        if (k != key && !m.contains(k)) m[k] = x;
      if (validate(v, m, root)) return true;
    }
    return false;
  }
  if (s.contains("allOf")) return validate(v, s["allOf"][0], root);
  if (!s.contains("type")) {
    if (s.contains("properties") || s.contains("required")) return validate_type(v, "object", s, root);
    if (s.contains("items") || s.contains("prefixItems")) return validate_type(v, "array", s, root);
    return true;
  }
  if (s["type"].is_string()) return validate_type(v, s["type"].get<std::string>(), s, root);
  for (const auto& t : s["type"])
    if (validate_type(v, t.get<std::string>(), s, root)) return true;
  return false;
}

}  // namespace vireo::structured::testing
