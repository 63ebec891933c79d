// What distinguishes one decoder family from another, as data: the generic decoder
// (decoder_model.cc) reads this; arch/<family>.cc files only fill it in by HF name.
#pragma once
#include <string>
#include <vector>

#include "backend/op_params.h"

namespace vireo {

// HF module names of the parts every decoder layer has, where a family renames them (LFM2).
struct ModuleNames {
  std::string input_norm = "input_layernorm";               // model.layers.<l>.<input_norm>.weight
  std::string post_attn_norm = "post_attention_layernorm";  // the MLP's input norm (sandwich: the attention's output norm)
  std::string pre_ffn_norm = "pre_feedforward_layernorm";   // sandwich norms: the MLP's input norm
  std::string post_ffn_norm = "post_feedforward_layernorm"; // sandwich / post-norm: the MLP's output norm
  std::string attn = "self_attn";
  std::string o_proj = "o_proj";                            // <attn>.<o_proj>.weight
  std::string mlp = "mlp";
  std::string gate_proj = "gate_proj", up_proj = "up_proj", down_proj = "down_proj";  // <mlp>.<...>.weight
  std::string router_bias = "gate.e_score_correction_bias";  // <mlp>.<router_bias> [E] (sigmoid routers)
  std::string router = "gate";                              // <mlp>.<router>.weight [E, hidden] (HunYuan-MoE: gate.wg)
  // <mlp>.<shared_expert>.{gate,up,down}_proj; empty: shared_expert (gated_shared_expert) or shared_experts.
  std::string shared_expert;
  std::string final_norm = "model.norm";
};

struct ArchSpec {
  std::string name;                      // HF architectures[0], e.g. "Qwen3ForCausalLM"
  QkNorm qk_norm = QkNorm::kNone;        // where q/k RMSNorm sits relative to RoPE
  std::string q_norm_name = "q_norm";    // self_attn.<q_norm_name>.weight
  std::string k_norm_name = "k_norm";
  bool qkv_bias = false;                 // q/k/v biases always present (Qwen2); else config.attention_bias
  bool post_norm = false;                // OLMo-2: h += norm(attn(h)); h += norm(mlp(h)); no input_layernorm
  bool neox_rope = true;                 // rotate halves (HF rotate_half) vs GPT-J interleaved pairs
  bool o_proj_bias = true;               // config.attention_bias biases o_proj too (GLM: q/k/v only)
  bool moe = false;                      // sparse MoE MLPs where config.moe_layer(l) (mlp.gate + mlp.experts.*)
  // Hybrid LFM2: layers where config.conv_layer(l) are gated short convolutions (conv.in_proj,
  // conv.conv, conv.out_proj) instead of attention; their state lives in the KV cache (KvCache).
  bool short_conv = false;
  // DeepSeek-V3: multi-head latent attention (self_attn.q_a_proj / q_a_layernorm / q_b_proj or q_proj,
  // kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj; config.mla), expanded at run time to
  // per-head K / V by the mla_pack op; MoE layers (moe) with the sigmoid router's
  // mlp.gate.e_score_correction_bias and, with config.n_shared_experts, mlp.shared_experts.*.
  bool mla = false;
  // Qwen3-Next / Qwen3.5 (arch/qwen3_next.cc): layers where config.linear_layer(l) are Gated DeltaNet
  // mixers (linear_attn.*, state per sequence slot in the model); the others are gated attention
  // (q_proj rows per head [query | gate], output * sigmoid(gate)). Every RMSNorm but the DeltaNet's is
  // zero-centred (norm(x) * (1 + w)): 1 is added to those weights at load. MoE layers add
  // mlp.shared_expert scaled by sigmoid(mlp.shared_expert_gate(x)).
  bool gated_delta_net = false;
  bool qkvz_interleaved = false;  // Qwen3-Next's per-key-head in_proj_qkvz / in_proj_ba (else in_proj_qkv/z/b/a)
  // MoE layers with one shared expert (mlp.shared_expert.*, config.shared_expert_intermediate_size wide)
  // scaled by sigmoid(mlp.shared_expert_gate(x)): Qwen2-MoE, Qwen3-Next, Qwen3.5-MoE.
  bool gated_shared_expert = false;
  // Multimodal wrappers: the text model's weights are under model.language_model.* (Qwen3.5) or
  // language_model.model.* (Gemma 3), whichever the checkpoint holds (model_loader.cc); lm_head.weight stays.
  bool language_model_prefix = false;
  // Gemma 3: four norms a layer: h += post_attention_layernorm(attn(input_layernorm(h)));
  // h += post_feedforward_layernorm(mlp(pre_feedforward_layernorm(h))).
  bool sandwich_norm = false;
  // Every RMSNorm, q_norm / k_norm included, is norm(x) * (1 + w) (Gemma): 1 is added to w at load.
  bool zero_centred_norm = false;
  // Embeddings scaled by sqrt(hidden_size), the factor rounded to the activation dtype (Gemma).
  bool scaled_embedding = false;
  // GPT-OSS (arch/gpt_oss.cc): MoE layers as mlp.router (weight and bias) and mlp.experts.{gate_up,down}_proj
  // stacked [E, in, out] with biases, gate / up columns interleaved; or MXFP4 (*_blocks / *_scales).
  bool gpt_oss_experts = false;
  // Qwen3-VL-MoE: mlp.experts.gate_up_proj stored [E, hidden, 2I] ([gate | up] columns) and down_proj
  // [E, I, hidden], transposed expert by expert at load (per-expert tensors, where present, win).
  bool transposed_experts = false;
  ModuleNames names;
};

// The registered families (arch/*.cc), in a fixed order.
const std::vector<ArchSpec>& arch_specs();
// Throws vireo::Error naming `source` (the config file) and listing the supported names.
const ArchSpec& find_arch_spec(const std::string& name, const std::string& source = "config.json");

// One function per family file; arch_registry.cc lists them (explicit, so static-library
// linking cannot drop a family).
void register_llama_family(std::vector<ArchSpec>& out);
void register_qwen_family(std::vector<ArchSpec>& out);
void register_olmo_family(std::vector<ArchSpec>& out);
void register_hunyuan_family(std::vector<ArchSpec>& out);
void register_lfm2_family(std::vector<ArchSpec>& out);
void register_deepseek_family(std::vector<ArchSpec>& out);
void register_qwen3_next_family(std::vector<ArchSpec>& out);
void register_gemma_family(std::vector<ArchSpec>& out);
void register_phi_family(std::vector<ArchSpec>& out);
void register_glm_family(std::vector<ArchSpec>& out);
void register_gpt_oss_family(std::vector<ArchSpec>& out);

}  // namespace vireo
