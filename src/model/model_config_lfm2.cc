// LFM2's config.json (transformers' Lfm2Config / Lfm2MoeConfig): its own names for common fields, the
// per-layer choice between attention and short convolution, the MLP width rule, and LFM2-MoE's router.
#include <cstdint>
#include <string>
#include <vector>

#include "model/config_json.h"
#include "model/model_config.h"

namespace vireo::config_json {

json lfm2_normalize(const json& in, const std::string& source) {
  json j = in;
  // Lfm2Config reads norm_eps (default 1e-5) and never rms_norm_eps.
  j["rms_norm_eps"] = get_float(in, source, "norm_eps", 1e-5f);
  // The original LFM2 names win over HF's when both are present (Lfm2Config.__init__ / __post_init__).
  if (in.contains("block_ff_dim") && !in["block_ff_dim"].is_null())
    j["intermediate_size"] = get_int(in, source, "block_ff_dim");
  j["tie_word_embeddings"] = get_bool(in, source, "tie_embedding", get_bool(in, source, "tie_word_embeddings", true));
  if (!in.contains("rope_theta") || in["rope_theta"].is_null())
    j["rope_theta"] = get_float(in, source, "theta", 1e6f);  // Lfm2Config.default_theta
  // transformers 5 may nest RoPE parameters by layer type; only attention layers rotate.
  if (auto rp = in.find("rope_parameters"); rp != in.end() && rp->is_object() && rp->contains("full_attention")) {
    if (!(*rp)["full_attention"].is_object()) fail(source, "rope_parameters.full_attention", "must be an object");
    j["rope_parameters"] = (*rp)["full_attention"];
  }
  return j;
}

namespace {

// conv_layers from layer_types ("conv" | "full_attention" per layer) or, without it, full_attn_idxs
// (the attention layers; every layer when absent), as Lfm2Config does.
std::vector<uint8_t> lfm2_layer_kinds(const json& j, const std::string& source, int num_layers) {
  std::vector<uint8_t> conv(num_layers, 0);
  if (auto lt = j.find("layer_types"); lt != j.end() && !lt->is_null()) {
    if (!lt->is_array() || static_cast<int>(lt->size()) != num_layers)
      fail(source, "layer_types", "must be a list of num_hidden_layers (" + std::to_string(num_layers) + ") names");
    for (int l = 0; l < num_layers; ++l) {
      const json& t = (*lt)[l];
      const std::string name = t.is_string() ? t.get<std::string>() : t.dump();
      if (name != "conv" && name != "full_attention")
        fail(source, "layer_types", "entry " + std::to_string(l) + " '" + name + "' is not supported (conv, full_attention)");
      conv[l] = name == "conv";
    }
    return conv;
  }
  auto idx = j.find("full_attn_idxs");
  if (idx == j.end() || idx->is_null()) return conv;
  if (!idx->is_array()) fail(source, "full_attn_idxs", "must be a list of layer indices");
  conv.assign(num_layers, 1);
  for (const auto& v : *idx) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= num_layers)
      fail(source, "full_attn_idxs", "must hold layer indices in [0, " + std::to_string(num_layers) + "), got " + v.dump());
    conv[v.get<int>()] = 0;
  }
  return conv;
}

}  // namespace

namespace {

// LFM2-MoE (Lfm2MoeSparseMoeBlock): layers from num_dense_layers on are sparse; sigmoid router scores,
// the top-k picked on scores + expert_bias (use_expert_bias) but weighted by the unbiased scores,
// divided by (their sum + 1e-6) when norm_topk_prob, times routed_scaling_factor: DeepSeek-V3's
// noaux_tc without groups. Its dense layers are intermediate_size wide as given (no width rule).
void parse_lfm2_moe(const json& j, const std::string& source, ModelConfig& c) {
  if (c.num_experts <= 0) fail(source, "num_experts", "must be > 0 for Lfm2MoeForCausalLM");
  c.first_k_dense_replace = get_int(j, source, "num_dense_layers", 2);
  if (c.first_k_dense_replace < 0) fail(source, "num_dense_layers", "must be >= 0");
  c.norm_topk_prob = get_bool(j, source, "norm_topk_prob", true);
  c.moe_sigmoid = true;
  c.moe_score_bias = get_bool(j, source, "use_expert_bias", true);
  c.moe_renorm_eps = 1e-6f;
  c.routed_scaling_factor = get_float(j, source, "routed_scaling_factor", 1.0f);
  if (!(c.routed_scaling_factor > 0)) fail(source, "routed_scaling_factor", "must be > 0");
}

}  // namespace

bool is_lfm2_moe(const std::string& a, const std::string& t) { return a == "Lfm2MoeForCausalLM" || t == "lfm2_moe"; }

void parse_lfm2(const json& j, const std::string& source, ModelConfig& c) {
  c.conv_layers = lfm2_layer_kinds(j, source, c.num_hidden_layers);
  c.conv_kernel = get_int(j, source, "conv_L_cache", 3);
  if (c.conv_kernel <= 0) fail(source, "conv_L_cache", "must be > 0");
  c.conv_bias = get_bool(j, source, "conv_bias", false);
  if (is_lfm2_moe(c.architecture, c.model_type)) return parse_lfm2_moe(j, source, c);
  // Lfm2MLP's width: intermediate_size as given, or with block_auto_adjust_ff_dim 2/3 of it, times
  // block_ffn_dim_multiplier and rounded up to block_multiple_of when the multiplier is not null
  // (Python's int() truncations on doubles, as there).
  if (!get_bool(j, source, "block_auto_adjust_ff_dim", true)) return;
  int64_t ff = static_cast<int64_t>(2.0 * c.intermediate_size / 3.0);
  auto mult = j.find("block_ffn_dim_multiplier");
  const bool has_mult = mult == j.end() || !mult->is_null();  // absent: Lfm2Config's default 1.0
  if (has_mult) {
    if (mult != j.end() && !mult->is_number()) fail(source, "block_ffn_dim_multiplier", "must be a number or null");
    const double m = mult == j.end() ? 1.0 : mult->get<double>();
    const int multiple = get_int(j, source, "block_multiple_of", 256);
    if (multiple <= 0) fail(source, "block_multiple_of", "must be > 0");
    ff = static_cast<int64_t>(m * static_cast<double>(ff));
    ff = multiple * ((ff + multiple - 1) / multiple);
  }
  if (ff <= 0 || ff > (int64_t{1} << 30))
    fail(source, "intermediate_size", "gives an MLP width of " + std::to_string(ff) +
                                          " after block_auto_adjust_ff_dim (must be in (0, 2^30])");
  c.intermediate_size = static_cast<int>(ff);
}

}  // namespace vireo::config_json
