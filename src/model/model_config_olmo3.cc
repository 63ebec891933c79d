// OLMo 3's config.json (transformers' Olmo3Config): OLMo-2's fields plus sliding-window attention on three
// layers of four. layer_types, when absent, is Olmo3Config's default (every 4th layer full_attention, the
// others sliding_attention) and sliding_window defaults to 4096. RoPE: one for every layer, or (transformers
// 5) rope_parameters per layer type: the full_attention entry is the model's RoPE, a default-type
// sliding_attention entry rotates the sliding layers with its own base (scaling only on global layers).
// The generic parse then reads the windows from layer_types.
#include <string>

#include "model/config_json.h"
#include "model/model_config.h"

namespace vireo::config_json {

bool is_olmo3(const std::string& a, const std::string& t) { return a == "Olmo3ForCausalLM" || t == "olmo3"; }

json olmo3_normalize(const json& in, const std::string& source) {
  json j = in;
  const int n = get_int(j, source, "num_hidden_layers");
  if (!has(j, "layer_types")) {
    json types = json::array();
    for (int l = 0; l < n; ++l) types.push_back((l + 1) % 4 != 0 ? "sliding_attention" : "full_attention");
    j["layer_types"] = types;
  }
  if (!j["layer_types"].is_array() || static_cast<int>(j["layer_types"].size()) != n)
    fail(source, "layer_types", "must be a list of num_hidden_layers names");
  if (!j.contains("sliding_window")) j["sliding_window"] = 4096;
  if (!has(j, "rms_norm_eps")) j["rms_norm_eps"] = 1e-5;  // Olmo3Config's defaults
  if (!has(j, "rope_theta") && !has(j, "rope_parameters")) j["rope_theta"] = 500000.0;
  // Older configs: rope_theta and rope_scaling at the top. As transformers (4.57's rotary_embs; 5's
  // conversion into rope_parameters per layer type) the scaling applies to the full-attention layers
  // only; the sliding layers rotate with plain RoPE at the same base.
  if (auto rs = j.find("rope_scaling");
      rs != j.end() && rs->is_object() && !has(j, "rope_parameters") && rs->value("rope_type", rs->value("type", "default")) != "default") {
    json full = *rs;
    if (!full.contains("rope_theta")) full["rope_theta"] = get_float(j, source, "rope_theta", 500000.0f);
    j["rope_parameters"] = {{"full_attention", full},
                            {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", full["rope_theta"]}}}};
    j.erase("rope_scaling");
  }
  if (auto rp = j.find("rope_parameters"); rp != j.end() && rp->is_object() && rp->contains("full_attention")) {
    const json full = (*rp)["full_attention"], local = rp->value("sliding_attention", json());
    if (!full.is_object()) fail(source, "rope_parameters.full_attention", "must be an object");
    if (local.is_object() && local != full) {
      if (local.value("rope_type", "default") != "default")
        fail(source, "rope_parameters.sliding_attention", "rope_type must be 'default' or the same as full_attention's");
      j["rope_local_base_freq"] = get_float(local, source, "rope_theta", 500000.0f);  // Olmo3Config's default_theta
    }
    j["rope_parameters"] = full;
    if (!full.contains("rope_theta")) j["rope_parameters"]["rope_theta"] = 500000.0;
  }
  return j;
}

bool is_olmoe(const std::string& a, const std::string& t) { return a == "OlmoeForCausalLM" || t == "olmoe"; }

json olmoe_normalize(const json& in, const std::string&) {
  json j = in;
  if (!has(j, "rms_norm_eps")) j["rms_norm_eps"] = 1e-5;  // OlmoeConfig's default
  return j;
}

void parse_olmo3(const json& j, const std::string& source, ModelConfig& c) {
  if (!has(j, "rope_local_base_freq")) return;
  c.rope_local_theta = get_float(j, source, "rope_local_base_freq", 10000.0f);
  if (!(c.rope_local_theta > 0)) fail(source, "rope_parameters.sliding_attention.rope_theta", "must be > 0");
  c.local_rope_layers.assign(c.num_hidden_layers, 0);
  for (int l = 0; l < c.num_hidden_layers; ++l) c.local_rope_layers[l] = j["layer_types"][l] == "sliding_attention";
}

}  // namespace vireo::config_json
