#include "server/json_fields.h"

#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "server/openai_errors.h"

namespace vireo::server {
namespace {

const Json* find_field(const Json& body, const char* key) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

ApiError type_error(const char* key, const char* expected) {
  return bad_request(std::string("'") + key + "' must be " + expected, key);
}

}  // namespace

bool has_field(const Json& body, const char* key) { return find_field(body, key) != nullptr; }

bool is_integral(const Json& v) {
  if (v.is_number_integer() || v.is_number_unsigned()) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      return false;
    return true;
  }
  if (v.is_number_float()) {
    double d = v.get<double>();
    return std::isfinite(d) && std::floor(d) == d && std::fabs(d) < 9.0e18;
  }
  return false;
}

int64_t as_int64(const Json& v) {
  if (v.is_number_float()) return static_cast<int64_t>(v.get<double>());
  return v.get<int64_t>();
}

std::optional<bool> get_bool(const Json& body, const char* key) {
  const Json* v = find_field(body, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) throw type_error(key, "a boolean");
  return v->get<bool>();
}

std::optional<int64_t> get_int(const Json& body, const char* key) {
  const Json* v = find_field(body, key);
  if (!v) return std::nullopt;
  if (!is_integral(*v)) throw type_error(key, "an integer");
  return as_int64(*v);
}

std::optional<double> get_number(const Json& body, const char* key) {
  const Json* v = find_field(body, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) throw type_error(key, "a number");
  double d = v->get<double>();
  if (!std::isfinite(d)) throw type_error(key, "a finite number");
  return d;
}

std::optional<std::string> get_string(const Json& body, const char* key) {
  const Json* v = find_field(body, key);
  if (!v) return std::nullopt;
  if (!v->is_string()) throw type_error(key, "a string");
  return v->get<std::string>();
}

std::optional<std::vector<std::string>> get_string_or_list(const Json& body, const char* key) {
  const Json* v = find_field(body, key);
  if (!v) return std::nullopt;
  if (v->is_string()) return std::vector<std::string>{v->get<std::string>()};
  if (!v->is_array()) throw type_error(key, "a string or a list of strings");
  std::vector<std::string> out;
  for (const auto& e : *v) {
    if (!e.is_string()) throw type_error(key, "a string or a list of strings");
    out.push_back(e.get<std::string>());
  }
  return out;
}

std::optional<std::vector<int64_t>> get_int_list(const Json& body, const char* key) {
  const Json* v = find_field(body, key);
  if (!v) return std::nullopt;
  if (!v->is_array()) throw type_error(key, "a list of integers");
  std::vector<int64_t> out;
  for (const auto& e : *v) {
    if (!is_integral(e)) throw type_error(key, "a list of integers");
    out.push_back(as_int64(e));
  }
  return out;
}

size_t json_depth(const Json& j, size_t limit) {
  std::vector<std::pair<const Json*, size_t>> stack{{&j, 1}};
  size_t deepest = 0;
  while (!stack.empty()) {
    auto [v, d] = stack.back();
    stack.pop_back();
    if (!v->is_structured()) continue;
    deepest = std::max(deepest, d);
    if (deepest > limit) return deepest;
    for (const auto& child : *v) stack.push_back({&child, d + 1});
  }
  return deepest;
}

std::string dump_json(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

}  // namespace vireo::server
