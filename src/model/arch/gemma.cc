// Gemma 3 (text): Llama-style attention with Qwen3's per-head q/k norms before RoPE, four
// zero-centred RMSNorms a layer (pre and post the attention and the MLP), embeddings scaled by
// sqrt(hidden), a GELU-tanh gated MLP (config hidden_activation), the attention scale from
// query_pre_attn_scalar, and sliding-window layers with their own RoPE base (model_config_gemma3.cc).
// Gemma3ForConditionalGeneration (4B and up) is read for its text model: weights under
// language_model.model.* (the hub's files, and what transformers 5.17 saves) or model.language_model.*.
#include "model/arch_spec.h"

namespace vireo {
void register_gemma_family(std::vector<ArchSpec>& out) {
  for (bool wrapper : {false, true}) {
    ArchSpec s;
    s.name = wrapper ? "Gemma3ForConditionalGeneration" : "Gemma3ForCausalLM";
    s.qk_norm = QkNorm::kPerHeadBeforeRope;
    s.sandwich_norm = true;
    s.zero_centred_norm = true;
    s.scaled_embedding = true;
    s.language_model_prefix = wrapper;
    out.push_back(s);
  }
}
}  // namespace vireo
