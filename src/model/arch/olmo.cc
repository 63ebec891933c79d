// OLMo-2: post-norm blocks (post_attention_layernorm / post_feedforward_layernorm on the branch
// outputs) and q_norm/k_norm over the full projection width before RoPE. OLMo 3: the same layers, three
// of four with a sliding window (model_config_olmo3.cc).
#include "model/arch_spec.h"

namespace vireo {
void register_olmo_family(std::vector<ArchSpec>& out) {
  for (const char* name : {"Olmo2ForCausalLM", "Olmo3ForCausalLM"})
    out.push_back({.name = name, .qk_norm = QkNorm::kFullWidth, .post_norm = true});
}
}  // namespace vireo
