// Typed reads of optional request fields: a missing or null field gives nullopt, a field of the
// wrong type throws ApiError 400 naming the field (param). Integers accept integral floats
// (5.0), as pydantic does in vLLM; booleans are never numbers.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace vireo::server {

// Insertion-ordered, as Python dicts: chat templates render tools and tool-call arguments with
// tojson, which must keep the client's key order to match transformers.
using Json = nlohmann::ordered_json;

std::optional<bool> get_bool(const Json& body, const char* key);
std::optional<int64_t> get_int(const Json& body, const char* key);
std::optional<double> get_number(const Json& body, const char* key);  // finite only
std::optional<std::string> get_string(const Json& body, const char* key);
// A string or a list of strings (OpenAI's `stop`).
std::optional<std::vector<std::string>> get_string_or_list(const Json& body, const char* key);
std::optional<std::vector<int64_t>> get_int_list(const Json& body, const char* key);

// Whether the field is there and not null (pydantic's "set" for an Optional field).
bool has_field(const Json& body, const char* key);

bool is_integral(const Json& v);
int64_t as_int64(const Json& v);  // requires is_integral(v)

// Nesting limit of request bodies (arrays / objects), far above any real request (tool schemas):
// request handling copies and converts JSON recursively (chat template values, tool schemas).
constexpr size_t kMaxJsonDepth = 128;
// Deepest array / object nesting of j, counted without recursion; stops early past `limit`.
size_t json_depth(const Json& j, size_t limit);

// Serializes with invalid UTF-8 replaced (token pieces can be partial byte sequences).
std::string dump_json(const Json& j);

}  // namespace vireo::server
