// SmolLM3's config.json (transformers' SmolLM3Config): Llama's fields plus NoPE layers. no_rope_layers[l]
// is 1 where layer l applies RoPE (the name reads the other way round), by default every
// no_rope_layer_interval-th layer (4) skips it; sliding windows, when use_sliding_window and
// sliding_window are set, only on the NoPE layers; tied embeddings unless said otherwise.
#include <string>

#include "model/config_json.h"
#include "model/model_config.h"

namespace vireo::config_json {

bool is_smollm3(const std::string& a, const std::string& t) { return a == "SmolLM3ForCausalLM" || t == "smollm3"; }

json smollm3_normalize(const json& in, const std::string& source) {
  json j = in;
  if (!has(j, "tie_word_embeddings")) j["tie_word_embeddings"] = true;
  const int n = get_int(j, source, "num_hidden_layers");
  if (!has(j, "no_rope_layers")) {
    const int interval = get_int(j, source, "no_rope_layer_interval", 4);
    if (interval <= 0) fail(source, "no_rope_layer_interval", "must be > 0");
    json flags = json::array();
    for (int l = 0; l < n; ++l) flags.push_back((l + 1) % interval != 0 ? 1 : 0);
    j["no_rope_layers"] = flags;
  }
  const json& flags = j["no_rope_layers"];
  if (!flags.is_array() || static_cast<int>(flags.size()) != n)
    fail(source, "no_rope_layers", "must be a list of num_hidden_layers flags");
  if (!has(j, "layer_types")) {  // SmolLM3Config: windows only on NoPE layers, and only when enabled
    const bool sliding = get_bool(j, source, "use_sliding_window", false) && has(j, "sliding_window");
    json types = json::array();
    for (int l = 0; l < n; ++l)
      types.push_back(sliding && !flags[l].get<int>() ? "sliding_attention" : "full_attention");
    j["layer_types"] = types;
  }
  return j;
}

void parse_smollm3(const json& j, const std::string& source, ModelConfig& c) {
  c.nope_layers.assign(c.num_hidden_layers, 0);
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const json& f = j["no_rope_layers"][l];
    if (!f.is_number_integer() && !f.is_boolean()) fail(source, "no_rope_layers", "must hold 0 / 1 flags");
    c.nope_layers[l] = (f.is_boolean() ? f.get<bool>() : f.get<int>() != 0) ? 0 : 1;
  }
}

}  // namespace vireo::config_json
