// EXAONE 4.0's config.json (transformers' Exaone4Config): with a sliding_window, layer_types (or, when
// absent, sliding_window_pattern: every pattern-th layer global, an "LLLG"-style string repeated, and the
// last layer always global) picks the sliding layers, and the global layers apply no RoPE (NoPE); without
// one every layer is global and rotates. Layers are OLMo-2's post-norm blocks with Qwen3's per-head q/k norms.
#include <string>

#include "model/config_json.h"
#include "model/model_config.h"

namespace vireo::config_json {

bool is_exaone4(const std::string& a, const std::string& t) { return a == "Exaone4ForCausalLM" || t == "exaone4"; }

json exaone4_normalize(const json& in, const std::string& source) {
  json j = in;
  const int n = get_int(j, source, "num_hidden_layers");
  if (!j.contains("sliding_window")) j["sliding_window"] = 4096;  // Exaone4Config's default
  if (!has(j, "layer_types")) {
    json types = json::array();
    // No window: every layer global, whatever the pattern says.
    const json pattern = has(j, "sliding_window") ? j.value("sliding_window_pattern", json(4)) : json(nullptr);
    for (int l = 0; l < n; ++l) {
      bool sliding = false;
      if (pattern.is_string()) {
        const std::string p = pattern.get<std::string>();
        if (p.empty() || p.find_first_not_of("LG") != std::string::npos)
          fail(source, "sliding_window_pattern", "must be a string of L (local) and G (global)");
        sliding = p[l % p.size()] == 'L' && l != n - 1;
      } else if (pattern.is_number_integer() && pattern.get<int>() > 0) {
        sliding = (l + 1) % pattern.get<int>() != 0;
      } else if (!pattern.is_null() && !(pattern.is_number_integer() && pattern.get<int>() == 0)) {
        fail(source, "sliding_window_pattern", "must be a positive integer, a string of L / G, or null");
      }
      types.push_back(sliding ? "sliding_attention" : "full_attention");
    }
    j["layer_types"] = types;
  }
  if (!j["layer_types"].is_array() || static_cast<int>(j["layer_types"].size()) != n)
    fail(source, "layer_types", "must be a list of num_hidden_layers names");
  return j;
}

void parse_exaone4(const json& j, const std::string& source, ModelConfig& c) {
  (void)source;
  c.nope_layers.assign(c.num_hidden_layers, 0);
  if (!has(j, "sliding_window")) return;  // no hybrid attention: every layer rotates
  for (int l = 0; l < c.num_hidden_layers; ++l) c.nope_layers[l] = j["layer_types"][l] != "sliding_attention";
}

}  // namespace vireo::config_json
