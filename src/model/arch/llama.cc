// Llama family: pre-norm, fused [q;k;v] and [gate;up], optional biases from config, neox RoPE.
// Mixtral: Mistral attention and sparse MoE MLPs in every layer (block_sparse_moe.gate and experts
// w1 / w3 / w2, or transformers 5's mlp.experts.gate_up_proj / down_proj), softmax top-k renormalised.
// SmolLM3: Llama with every no_rope_layer_interval-th layer skipping RoPE (model_config_smollm3.cc).
// Granite (3.x dense): Llama with four scalar multipliers (model_config_granite.cc). GraniteMoe: the same
// with Mixtral's MoE in every layer, its experts stacked in the checkpoint (block_sparse_moe.input_linear
// [E, 2I, hidden] = [gate; up] rows, output_linear [E, hidden, I], router.layer).
#include "model/arch_spec.h"

namespace vireo {
void register_llama_family(std::vector<ArchSpec>& out) {
  out.push_back({.name = "LlamaForCausalLM"});
  out.push_back({.name = "MistralForCausalLM"});
  out.push_back({.name = "MixtralForCausalLM", .moe = true});
  out.push_back({.name = "SmolLM3ForCausalLM"});
  out.push_back({.name = "GraniteForCausalLM"});
  out.push_back({.name = "GraniteMoeForCausalLM", .moe = true});
}
}  // namespace vireo
