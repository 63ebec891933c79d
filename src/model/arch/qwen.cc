// Qwen2: q/k/v biases always. Qwen3: per-head RMSNorm of q and k (self_attn.q_norm/k_norm) before RoPE.
// Qwen3-MoE: Qwen3 attention, sparse MoE MLPs (router mlp.gate, experts mlp.experts.<e>.*; no shared
// expert) except on config.mlp_only_layers. Qwen2-MoE (Qwen1.5-MoE, Qwen2-57B-A14B): Qwen2 attention, the
// same MoE plus a shared expert scaled by sigmoid(mlp.shared_expert_gate(x)).
// Qwen3-VL / Qwen3-VL-MoE (*ForConditionalGeneration): the Qwen3 / Qwen3-MoE text model under
// model.language_model.* (text positions make its interleaved M-RoPE plain RoPE; the vision tower and
// its deepstack features only act on images, which text serving has none of).
#include "model/arch_spec.h"

namespace vireo {
void register_qwen_family(std::vector<ArchSpec>& out) {
  out.push_back({.name = "Qwen2ForCausalLM", .qkv_bias = true});
  out.push_back({.name = "Qwen3ForCausalLM", .qk_norm = QkNorm::kPerHeadBeforeRope});
  out.push_back({.name = "Qwen3MoeForCausalLM", .qk_norm = QkNorm::kPerHeadBeforeRope, .moe = true});
  out.push_back({.name = "Qwen2MoeForCausalLM", .qkv_bias = true, .moe = true, .gated_shared_expert = true});
  // Qwen2-VL / Qwen2.5-VL: Qwen2's text model (model.language_model.* in transformers 5's files, model.* in
  // the hub's older ones; model_loader.cc takes either), its M-RoPE plain RoPE for text positions.
  for (const char* name : {"Qwen2VLForConditionalGeneration", "Qwen2_5_VLForConditionalGeneration"})
    out.push_back({.name = name, .qkv_bias = true, .language_model_prefix = true});
  out.push_back({.name = "Qwen3VLForConditionalGeneration", .qk_norm = QkNorm::kPerHeadBeforeRope,
                 .language_model_prefix = true});
  out.push_back({.name = "Qwen3VLMoeForConditionalGeneration", .qk_norm = QkNorm::kPerHeadBeforeRope, .moe = true,
                 .language_model_prefix = true, .transposed_experts = true});
}
}  // namespace vireo
