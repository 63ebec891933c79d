// Gemma 2 and 3 config.json files. Gemma 3 (transformers' Gemma3TextConfig, and the multimodal
// Gemma3Config whose text model sits in text_config): hidden_activation, the attention scale from
// query_pre_attn_scalar, a second RoPE base for the sliding-window layers (rope_local_base_freq, or
// transformers 5's rope_parameters per layer type) and the layer pattern (layer_types or
// sliding_window_pattern). Gemma 2 (Gemma2Config): the same scale and activation, one RoPE, every other
// layer sliding, and tanh soft-capping of the attention scores and the final logits.
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/config_json.h"
#include "model/model_config.h"

namespace vireo::config_json {

bool is_gemma3(const std::string& a, const std::string& t) {
  return a == "Gemma3ForCausalLM" || a == "Gemma3ForConditionalGeneration" || t == "gemma3_text" || t == "gemma3";
}

namespace {
// Shared by Gemma 2 and 3: the config class's defaults where a field is absent, a window of 4096 unless
// given (an explicit null: no window), the MLP's activation from hidden_activation (HF's Gemma MLPs ignore
// hidden_act), causal attention only.
json gemma_defaults(json j, const std::string& source, const std::vector<std::pair<const char*, json>>& defaults) {
  for (const auto& [key, value] : defaults)
    if (!has(j, key)) j[key] = value;
  if (!j.contains("sliding_window")) j["sliding_window"] = 4096;
  j["hidden_act"] = has(j, "hidden_activation") ? j["hidden_activation"] : json("gelu_pytorch_tanh");
  if (get_bool(j, source, "use_bidirectional_attention", false))
    fail(source, "use_bidirectional_attention", "is not supported (causal decoding only)");
  return j;
}
}  // namespace

json gemma3_normalize(const json& in, const std::string& source) {
  // Gemma3TextConfig's defaults: the released 4B / 12B / 27B configs give only what differs from them
  // (gemma-3-4b-it's text_config: hidden_size, intermediate_size, num_hidden_layers, rope_scaling,
  // sliding_window).
  json j = gemma_defaults(lift_text_config(in, source), source,
                          {{"vocab_size", 262208}, {"hidden_size", 2304}, {"intermediate_size", 9216},
                           {"num_hidden_layers", 26}, {"num_attention_heads", 8}, {"num_key_value_heads", 4},
                           {"head_dim", 256}, {"rms_norm_eps", 1e-6}, {"max_position_embeddings", 131072},
                           {"tie_word_embeddings", true}, {"rope_theta", 1000000.0}, {"bos_token_id", 2},
                           {"eos_token_id", 1}});
  // Layer kinds: layer_types, else every sliding_window_pattern-th layer global (Gemma3TextConfig).
  const int n = get_int(j, source, "num_hidden_layers");
  if (!has(j, "layer_types")) {
    const int pattern = get_int(j, source, "sliding_window_pattern", 6);
    if (pattern <= 0) fail(source, "sliding_window_pattern", "must be > 0");
    json types = json::array();
    for (int l = 0; l < n; ++l) types.push_back((l + 1) % pattern ? "sliding_attention" : "full_attention");
    j["layer_types"] = types;
  }
  // transformers 5 nests RoPE by layer type: the global layers' entry is the model's RoPE, the local
  // one's base becomes rope_local_base_freq.
  if (auto rp = j.find("rope_parameters"); rp != j.end() && rp->is_object() && rp->contains("full_attention")) {
    const json full = (*rp)["full_attention"], local = rp->value("sliding_attention", json());
    if (!full.is_object()) fail(source, "rope_parameters.full_attention", "must be an object");
    if (local.is_object()) {
      if (local.value("rope_type", "default") != "default")
        fail(source, "rope_parameters.sliding_attention", "rope_type must be 'default'");
      j["rope_local_base_freq"] = get_float(local, source, "rope_theta", 10000.0f);
    }
    j["rope_parameters"] = full;
  }
  return j;
}

namespace {
// attn_logit_softcapping / final_logit_softcapping (null or absent: none).
void parse_softcaps(const json& j, const std::string& source, ModelConfig& c) {
  for (auto [key, out] : {std::pair<const char*, float*>{"attn_logit_softcapping", &c.attn_logit_softcapping},
                          {"final_logit_softcapping", &c.final_logit_softcapping}}) {
    *out = has(j, key) ? get_float(j, source, key, 0.0f) : 0.0f;
    if (!(*out >= 0)) fail(source, key, "must be > 0 or null");
  }
}
}  // namespace

bool is_gemma1(const std::string& a, const std::string& t) { return a == "GemmaForCausalLM" || t == "gemma"; }

json gemma1_normalize(const json& in, const std::string& source) {
  // GemmaConfig's defaults (gemma-7b's shape); Llama's layer otherwise: no window, no soft-capping, the
  // attention scale head_dim^-0.5.
  json j = in;
  const std::vector<std::pair<const char*, json>> defaults = {
      {"vocab_size", 256000},     {"hidden_size", 3072},           {"intermediate_size", 24576},
      {"num_hidden_layers", 28},  {"num_attention_heads", 16},     {"num_key_value_heads", 16},
      {"head_dim", 256},          {"rms_norm_eps", 1e-6},          {"max_position_embeddings", 8192},
      {"tie_word_embeddings", true}, {"rope_theta", 10000.0},      {"bos_token_id", 2},
      {"eos_token_id", 1}};
  for (const auto& [key, value] : defaults)
    if (!has(j, key)) j[key] = value;
  // vLLM and transformers' GemmaMLP: hidden_activation where given, else GELU-tanh whatever hidden_act says
  // (the released configs say "gelu" there).
  j["hidden_act"] = has(j, "hidden_activation") ? j["hidden_activation"] : json("gelu_pytorch_tanh");
  (void)source;
  return j;
}

bool is_gemma2(const std::string& a, const std::string& t) { return a == "Gemma2ForCausalLM" || t == "gemma2"; }

json gemma2_normalize(const json& in, const std::string& source) {
  // Gemma2Config's defaults (the released 2B / 9B / 27B configs write most of them out).
  json j = gemma_defaults(in, source,
                          {{"vocab_size", 256000}, {"hidden_size", 2304}, {"intermediate_size", 9216},
                           {"num_hidden_layers", 26}, {"num_attention_heads", 8}, {"num_key_value_heads", 4},
                           {"head_dim", 256}, {"rms_norm_eps", 1e-6}, {"max_position_embeddings", 8192},
                           {"tie_word_embeddings", true}, {"rope_theta", 10000.0}, {"bos_token_id", 2},
                           {"eos_token_id", 1}});
  // Soft-caps absent: the defaults; an explicit null: none.
  if (!j.contains("final_logit_softcapping")) j["final_logit_softcapping"] = 30.0;
  if (!j.contains("attn_logit_softcapping")) j["attn_logit_softcapping"] = 50.0;
  if (!has(j, "layer_types")) {  // layer 0 slides, layer 1 is global, and so on
    json types = json::array();
    for (int l = 0; l < get_int(j, source, "num_hidden_layers"); ++l)
      types.push_back((l + 1) % 2 ? "sliding_attention" : "full_attention");
    j["layer_types"] = types;
  }
  return j;
}

void parse_gemma2(const json& j, const std::string& source, ModelConfig& c) {
  const float qpas = get_float(j, source, "query_pre_attn_scalar", 256.0f);
  if (!(qpas > 0)) fail(source, "query_pre_attn_scalar", "must be > 0");
  c.attention_scale = static_cast<float>(std::pow(static_cast<double>(qpas), -0.5));
  parse_softcaps(j, source, c);
}

void parse_gemma3(const json& j, const std::string& source, ModelConfig& c) {
  const float qpas = get_float(j, source, "query_pre_attn_scalar", 256.0f);
  if (!(qpas > 0)) fail(source, "query_pre_attn_scalar", "must be > 0");
  c.attention_scale = static_cast<float>(std::pow(static_cast<double>(qpas), -0.5));
  parse_softcaps(j, source, c);  // Gemma3TextConfig has them too (null in the released checkpoints)
  c.rope_local_theta = get_float(j, source, "rope_local_base_freq", 10000.0f);
  if (!(c.rope_local_theta > 0)) fail(source, "rope_local_base_freq", "must be > 0");
  const json& lt = j["layer_types"];
  if (!lt.is_array() || static_cast<int>(lt.size()) != c.num_hidden_layers)
    fail(source, "layer_types", "must be a list of num_hidden_layers names");
  c.local_rope_layers.assign(c.num_hidden_layers, 0);
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string name = lt[l].is_string() ? lt[l].get<std::string>() : lt[l].dump();
    if (name != "sliding_attention" && name != "full_attention")
      fail(source, "layer_types", "entry " + std::to_string(l) + " '" + name +
                                      "' is not supported (sliding_attention, full_attention)");
    c.local_rope_layers[l] = name == "sliding_attention";
  }
}

}  // namespace vireo::config_json
