// deepseek2 GGUF files as llama.cpp's converter writes them (DeepseekV2Model) and as llama.cpp runs them:
// - the attention metadata describes llama.cpp's absorbed MLA (head_count_kv 1, key_length
//   kv_lora_rank + rope dims); the per-head sizes are attention.key_length_mla / value_length_mla (files
//   from April 2025 on, kv_b_proj split into attn_k_b / attn_v_b) or key_length / value_length (older
//   files, one attn_kv_b);
// - routing: expert_gating_func 1 softmax / 2 sigmoid (absent: softmax), the top-k by probability plus
//   exp_probs_b where present, weights the unbiased probabilities, renormalised when expert_weights_norm,
//   always times expert_weights_scale; group limit (top-2 sums) only where expert_group_count says so;
// - RoPE on consecutive pairs of the rope dims (HF's rope_interleave), YaRN with a cos / sin magnitude of
//   1 and the softmax scale mscale^2 / sqrt(qk_nope + qk_rope), mscale = 1 + yarn_log_multiplier ln(factor)
//   (the file holds 0.1 mscale_all_dim); every RMSNorm with the one eps.
#include <cmath>

#include "core/error.h"
#include "model/gguf_config_arch.h"

namespace vireo {

using nlohmann::json;

namespace {

constexpr int64_t kGatingSoftmax = 1, kGatingSigmoid = 2;

// qk_nope, v head dims: the *_mla keys where the file has them, else the legacy per-head lengths.
std::pair<int64_t, int64_t> nope_and_v(const GgufFile& f, const std::string& a, int64_t rope_dims) {
  const bool mla = f.find(a + ".attention.key_length_mla") != nullptr;
  const int64_t k = gguf_required_int(f, a + (mla ? ".attention.key_length_mla" : ".attention.key_length"));
  const int64_t v = gguf_required_int(f, a + (mla ? ".attention.value_length_mla" : ".attention.value_length"));
  if (k <= rope_dims) throw Error(f.path() + ": " + a + " key length " + std::to_string(k) + " leaves no room for " +
                                  std::to_string(rope_dims) + " rope dims");
  return {k - rope_dims, v};
}

}  // namespace

void deepseek2_fields(const GgufShards& m, const std::string& a, json& j) {
  const GgufFile& f = m.first();
  const int64_t gating = f.get_int(a + ".expert_gating_func").value_or(kGatingSoftmax);
  if (gating != kGatingSoftmax && gating != kGatingSigmoid)
    throw Error(f.path() + ": metadata '" + a + ".expert_gating_func' = " + std::to_string(gating) +
                " is not supported (1: softmax, 2: sigmoid)");
  const bool sigmoid = gating == kGatingSigmoid;
  // The two HF classes differ in what vireo's parse fixes for them; deepseek2_finish sets llama.cpp's rules.
  j["architectures"] = {sigmoid ? "DeepseekV3ForCausalLM" : "DeepseekV2ForCausalLM"};
  j["model_type"] = sigmoid ? "deepseek_v3" : "deepseek_v2";
  const int64_t heads = gguf_required_int(f, a + ".attention.head_count");
  j["num_attention_heads"] = heads;
  j["num_key_value_heads"] = heads;  // MLA is expanded per head
  const int64_t rope_dims = gguf_required_int(f, a + ".rope.dimension_count");
  const auto [nope, v] = nope_and_v(f, a, rope_dims);
  j["qk_rope_head_dim"] = rope_dims;
  j["qk_nope_head_dim"] = nope;
  j["v_head_dim"] = v;
  j["kv_lora_rank"] = gguf_required_int(f, a + ".attention.kv_lora_rank");
  j["q_lora_rank"] = f.find(a + ".attention.q_lora_rank") ? json(gguf_required_int(f, a + ".attention.q_lora_rank"))
                                                           : json(nullptr);
  j["intermediate_size"] = gguf_required_int(f, a + ".feed_forward_length");
  j["first_k_dense_replace"] = f.get_int(a + ".leading_dense_block_count").value_or(0);
  j["n_routed_experts"] = gguf_required_int(f, a + ".expert_count");
  j["num_experts_per_tok"] = gguf_required_int(f, a + ".expert_used_count");
  j["moe_intermediate_size"] = gguf_required_int(f, a + ".expert_feed_forward_length");
  j["n_shared_experts"] = f.get_int(a + ".expert_shared_count").value_or(0);
  j["routed_scaling_factor"] = f.get_float(a + ".expert_weights_scale").value_or(1.0);
  j["norm_topk_prob"] = f.get_bool(a + ".expert_weights_norm").value_or(false);
  j["n_group"] = f.get_int(a + ".expert_group_count").value_or(1);
  j["topk_group"] = f.get_int(a + ".expert_group_used_count").value_or(1);
  j["rope_interleave"] = true;
  if (j.contains("rope_scaling") && j["rope_scaling"]["rope_type"] == "yarn") {
    // ggml scales cos / sin by its own 1 + 0.1 ln(factor) and llama.cpp divides it back out: magnitude 1,
    // which HF's DeepSeek yarn gives with mscale == mscale_all_dim.
    json& r = j["rope_scaling"];
    r.erase("attention_factor");
    const double ms = f.get_float(a + ".rope.scaling.yarn_log_multiplier").value_or(0.0) / 0.1;
    r["mscale"] = ms;
    r["mscale_all_dim"] = ms;
  }
  if (!sigmoid && m.find_tensor("blk." + std::to_string(j["first_k_dense_replace"].get<int64_t>()) + ".exp_probs_b.bias").info)
    throw Error(f.path() + ": exp_probs_b with softmax gating is not supported");
}

void deepseek2_finish(const GgufShards& m, const std::string& a, ModelConfig& c) {
  const GgufFile& f = m.first();
  // What parse_deepseek fixes for transformers' DeepseekV2 (never renormalised, no groups, q_a / kv_a
  // norms at 1e-6, no mscale in the softmax scale), llama.cpp takes from the file.
  c.norm_topk_prob = f.get_bool(a + ".expert_weights_norm").value_or(false);
  c.moe_n_group = static_cast<int>(f.get_int(a + ".expert_group_count").value_or(1));
  c.moe_topk_group = static_cast<int>(f.get_int(a + ".expert_group_used_count").value_or(1));
  if (c.moe_n_group < 1 || c.num_experts % c.moe_n_group != 0 || c.moe_topk_group < 1 || c.moe_topk_group > c.moe_n_group)
    throw Error(f.path() + ": metadata '" + a + ".expert_group_count' / 'expert_group_used_count' do not divide the experts");
  c.mla.norm_eps = c.rms_norm_eps;
  c.mla.rope_interleave = true;
  double scale = 1.0 / std::sqrt(static_cast<double>(c.mla.qk_nope_head_dim + c.mla.qk_rope_head_dim));
  if (c.rope_scaling.type == "yarn" && c.rope_scaling.factor > 1) {
    const double log_mul = f.get_float(a + ".rope.scaling.yarn_log_multiplier").value_or(0.0);
    const double ms = 1.0 + log_mul * std::log(c.rope_scaling.factor);
    scale *= ms * ms;
  }
  c.attention_scale = static_cast<float>(scale);
}

}  // namespace vireo
