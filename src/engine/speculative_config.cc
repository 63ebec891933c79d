#include "engine/speculative_config.h"

#include <fmt/format.h>

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
  std::string method = j.value("method", std::string());
  // vLLM's older spelling: the method as the draft "model".
  if (method.empty() && j.contains("model") && j["model"].is_string()) {
    const std::string m = j["model"].get<std::string>();
    if (m == "[ngram]" || m == "ngram") method = "ngram";
  }
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

std::string spec_decode_summary(const EngineStats& s) {
  if (!s.spec_enabled) return "";
  const double drafts = static_cast<double>(s.spec_num_drafts), tokens = static_cast<double>(s.spec_num_draft_tokens);
  std::string per_pos;
  for (uint64_t n : s.spec_accepted_per_pos)
    per_pos += fmt::format("{}{:.3f}", per_pos.empty() ? "" : ", ", drafts > 0 ? n / drafts : 0.0);
  return fmt::format(
      "SpecDecoding metrics: Mean acceptance length: {:.2f}, Drafted steps: {}, Draft tokens: {}, Accepted tokens: "
      "{}, Draft acceptance rate: {:.1f}%, Per-position acceptance rate: {}",
      drafts > 0 ? 1.0 + s.spec_num_accepted_tokens / drafts : 0.0, s.spec_num_drafts, s.spec_num_draft_tokens,
      s.spec_num_accepted_tokens, tokens > 0 ? 100.0 * s.spec_num_accepted_tokens / tokens : 0.0, per_pos);
}

}  // namespace vireo
