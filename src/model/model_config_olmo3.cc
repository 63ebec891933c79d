// OLMo 3's config.json (transformers' Olmo3Config): OLMo-2's fields plus sliding-window attention on three
// layers of four. layer_types, when absent, is Olmo3Config's default (every 4th layer full_attention, the
// others sliding_attention) and sliding_window defaults to 4096; one RoPE (scaling included) for every
// layer. The generic parse then reads the windows from layer_types.
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
  return j;
}

}  // namespace vireo::config_json
