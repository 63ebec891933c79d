#include "engine/compilation_config.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>

#include "core/error.h"

namespace vireo {
namespace {

[[noreturn]] void bad(const std::string& value, const std::string& why) {
  throw Error("--compilation-config " + value + ": " + why);
}

void cap(EngineConfig& c, int size) {
  if (size <= 0) {
    c.enforce_eager = true;
    return;
  }
  c.max_cuda_graph_size = c.max_cuda_graph_size > 0 ? std::min(c.max_cuda_graph_size, size) : size;
}

void apply_mode(const std::string& value, std::string mode, EngineConfig& c) {
  for (char& ch : mode) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  if (mode == "NONE") {
    c.enforce_eager = true;
    return;
  }
  if (mode != "FULL" && mode != "FULL_DECODE_ONLY" && mode != "PIECEWISE" && mode != "FULL_AND_PIECEWISE")
    bad(value, "cudagraph_mode must be NONE, PIECEWISE, FULL, FULL_DECODE_ONLY or FULL_AND_PIECEWISE");
}

int size_of(const std::string& value, const nlohmann::json& v, const char* key) {
  if (!v.is_number_integer()) bad(value, std::string(key) + " must be an integer");
  return v.get<int>();
}

void apply_key(const std::string& value, const std::string& key, const nlohmann::json& v, EngineConfig& c) {
  if (key == "cudagraph_mode") {
    if (!v.is_string()) bad(value, "cudagraph_mode must be a string such as \"NONE\" or \"FULL_AND_PIECEWISE\"");
    apply_mode(value, v.get<std::string>(), c);
  } else if (key == "cudagraph_capture_sizes") {
    if (!v.is_array()) bad(value, "cudagraph_capture_sizes must be a list of batch sizes");
    int largest = 0;
    for (const auto& s : v) largest = std::max(largest, size_of(value, s, "each capture size"));
    cap(c, largest);
  } else if (key == "max_cudagraph_capture_size" || key == "max_capture_size") {
    cap(c, size_of(value, v, key.c_str()));
  }
  // Anything else (mode / level, passes, custom_ops, backend, ...) belongs to torch.compile: no effect.
}

}  // namespace

void apply_compilation_config(const std::string& value, EngineConfig& c) {
  if (value.empty()) return;
  if (value.size() == 1 && value[0] >= '0' && value[0] <= '3') {  // -O0 .. -O3
    if (value[0] == '0') c.enforce_eager = true;
    return;
  }
  if (value[0] == '.') {  // -O.key=value
    const size_t eq = value.find('=');
    if (eq == std::string::npos || eq == 1) bad(value, "expected -O.<key>=<value>");
    const std::string key = value.substr(1, eq - 1), raw = value.substr(eq + 1);
    nlohmann::json v = nlohmann::json::parse(raw, nullptr, /*allow_exceptions=*/false);
    if (v.is_discarded()) v = raw;  // a bare word: NONE, FULL, ...
    apply_key(value, key, v, c);
    return;
  }
  const nlohmann::json j = nlohmann::json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) bad(value, "expected an optimization level 0-3 or a JSON object");
  for (const auto& [key, v] : j.items()) apply_key(value, key, v, c);
}

}  // namespace vireo
