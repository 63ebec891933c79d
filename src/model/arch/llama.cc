// Llama family: pre-norm, fused [q;k;v] and [gate;up], optional biases from config, neox RoPE.
// Mixtral: Mistral attention and sparse MoE MLPs in every layer (block_sparse_moe.gate and experts
// w1 / w3 / w2, or transformers 5's mlp.experts.gate_up_proj / down_proj), softmax top-k renormalised.
// SmolLM3: Llama with every no_rope_layer_interval-th layer skipping RoPE (model_config_smollm3.cc).
// Granite (3.x dense): Llama with four scalar multipliers (model_config_granite.cc). GraniteMoe: the same
// with Mixtral's MoE in every layer, its experts stacked in the checkpoint (block_sparse_moe.input_linear
// [E, 2I, hidden] = [gate; up] rows, output_linear [E, hidden, I], router.layer).
// Seed-OSS: Llama with q/k/v biases (attention_bias) and an o_proj bias only with attention_out_bias.
// Mistral 3 (Mistral3ForConditionalGeneration: Mistral Small 3.1 / 3.2): the Mistral text model under
// model.language_model.* (or language_model.model.*, lm_head as language_model.lm_head), its config in
// text_config (model_config_text_wrappers.cc); the vision tower is not run.
#include "model/arch_spec.h"

namespace vireo {
void register_llama_family(std::vector<ArchSpec>& out) {
  out.push_back({.name = "LlamaForCausalLM"});
  out.push_back({.name = "MistralForCausalLM"});
  out.push_back({.name = "MixtralForCausalLM", .moe = true});
  out.push_back({.name = "SmolLM3ForCausalLM"});
  out.push_back({.name = "GraniteForCausalLM"});
  out.push_back({.name = "GraniteMoeForCausalLM", .moe = true});
  out.push_back({.name = "SeedOssForCausalLM", .o_proj_bias = false});
  out.push_back({.name = "Mistral3ForConditionalGeneration", .language_model_prefix = true});
}
}  // namespace vireo
