// GLM (GlmForCausalLM: GLM-4-9B-chat-hf) and GLM-4 (Glm4ForCausalLM: GLM-4-9B / 32B-0414): Llama-like
// attention with q/k/v biases (config.attention_bias) but none on o_proj, GPT-J interleaved RoPE over the
// first partial_rotary_factor (0.5) of each head, [gate; up] fused in the checkpoint (mlp.gate_up_proj).
// GLM-4 adds sandwich norms: post_self_attn_layernorm after the attention, post_attention_layernorm
// before the MLP, post_mlp_layernorm after it (plain RMSNorms).
// ERNIE 4.5 dense and MoE: see below. GLM-4.5 / 4.6 / 4.7 (Glm4MoeForCausalLM): pre-norm layers, q/k/v biases (attention_bias) but none on
// o_proj, per-head q_norm / k_norm before RoPE when use_qk_norm, NeoX RoPE over the first half of each
// head; from first_k_dense_replace on, DeepSeek-V3's MoE (sigmoid router with e_score_correction_bias,
// groups, routed_scaling_factor, mlp.shared_experts) (model_config_glm.cc).
#include "model/arch_spec.h"

namespace vireo {
void register_glm_family(std::vector<ArchSpec>& out) {
  ArchSpec glm{.name = "GlmForCausalLM", .neox_rope = false, .o_proj_bias = false};
  out.push_back(glm);
  ArchSpec glm4 = glm;
  glm4.name = "Glm4ForCausalLM";
  glm4.sandwich_norm = true;
  glm4.names.post_attn_norm = "post_self_attn_layernorm";
  glm4.names.pre_ffn_norm = "post_attention_layernorm";
  glm4.names.post_ffn_norm = "post_mlp_layernorm";
  out.push_back(glm4);
  // ERNIE 4.5 (dense): Llama with GLM's interleaved RoPE over the whole head and use_bias on every
  // projection (model_config_glm.cc maps it onto attention_bias / mlp_bias).
  out.push_back({.name = "Ernie4_5ForCausalLM", .neox_rope = false});
  // ERNIE 4.5 MoE: the same attention; sparse layers route by mlp.gate (fp32) with the choice bias
  // mlp.moe_statics.e_score_correction_bias over mlp.experts.*, plus a gated mlp.shared_experts MLP
  // (model_config_ernie.cc).
  ArchSpec ernie_moe{.name = "Ernie4_5_MoeForCausalLM", .neox_rope = false, .moe = true};
  ernie_moe.names.router_bias = "moe_statics.e_score_correction_bias";
  out.push_back(ernie_moe);
  out.push_back({.name = "Glm4MoeForCausalLM", .qk_norm = QkNorm::kPerHeadBeforeRope, .o_proj_bias = false, .moe = true});
}
}  // namespace vireo
