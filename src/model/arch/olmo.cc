// OLMo-2: post-norm blocks (post_attention_layernorm / post_feedforward_layernorm on the branch
// outputs) and q_norm/k_norm over the full projection width before RoPE. OLMo 3: the same layers, three
// of four with a sliding window (model_config_olmo3.cc).
#include "model/arch_spec.h"

namespace vireo {
void register_olmo_family(std::vector<ArchSpec>& out) {
  for (const char* name : {"Olmo2ForCausalLM", "Olmo3ForCausalLM"})
    out.push_back({.name = name, .qk_norm = QkNorm::kFullWidth, .post_norm = true});
  // EXAONE 4.0: OLMo-2's post-norm layers with per-head q/k norms (before RoPE); global layers NoPE when
  // hybrid (model_config_exaone4.cc).
  out.push_back({.name = "Exaone4ForCausalLM", .qk_norm = QkNorm::kPerHeadBeforeRope, .post_norm = true});
  // OLMoE: pre-norm Llama layers with OLMo-2's full-width q/k norms, sparse MoE in every layer (softmax
  // router, top-k renormalised only with norm_topk_prob, experts intermediate_size wide).
  out.push_back({.name = "OlmoeForCausalLM", .qk_norm = QkNorm::kFullWidth, .moe = true});
}
}  // namespace vireo
