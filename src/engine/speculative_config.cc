#include "engine/speculative_config.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace vireo {

namespace {

int int_field(const nlohmann::json& j, const char* key, int fallback) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number_integer()) throw Error(std::string("--speculative-config: ") + key + " must be an integer");
  return it->get<int>();
}

}  // namespace

SpeculativeConfig SpeculativeConfig::parse(const std::string& text) {
  SpeculativeConfig c;
  if (text.empty()) return c;
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object())
    throw Error("--speculative-config: expected a JSON object, e.g. '{\"method\": \"ngram\", "
                "\"num_speculative_tokens\": 4, \"prompt_lookup_max\": 4}'");
  const std::string method = j.value("method", std::string());
  if (j.contains("model") && !j["model"].is_null() && method != "ngram" && method != "[ngram]")
    throw Error("--speculative-config: draft models are not supported (method ngram only)");
  if (method != "ngram" && method != "[ngram]")
    throw Error("--speculative-config: method '" + method + "' is not supported (ngram only: prompt lookup)");
  c.method = "ngram";
  c.num_speculative_tokens = int_field(j, "num_speculative_tokens", 0);
  if (c.num_speculative_tokens < 1 || c.num_speculative_tokens > 16)
    throw Error("--speculative-config: num_speculative_tokens must be in [1, 16], got " +
                std::to_string(c.num_speculative_tokens));
  // vLLM: either bound defaults to the other, both to 5 when neither is given.
  const int lo = int_field(j, "prompt_lookup_min", 0), hi = int_field(j, "prompt_lookup_max", 0);
  c.prompt_lookup_max = hi ? hi : lo ? lo : 5;
  c.prompt_lookup_min = lo ? lo : hi ? hi : 5;
  if (c.prompt_lookup_min < 1 || c.prompt_lookup_max < c.prompt_lookup_min)
    throw Error("--speculative-config: need 1 <= prompt_lookup_min <= prompt_lookup_max, got " +
                std::to_string(c.prompt_lookup_min) + " and " + std::to_string(c.prompt_lookup_max));
  c.disable_by_batch_size = int_field(j, "disable_by_batch_size", 0);
  if (c.disable_by_batch_size < 0) throw Error("--speculative-config: disable_by_batch_size must be >= 0");
  return c;
}

}  // namespace vireo
