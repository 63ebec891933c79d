// Gemma 3 (text): Llama-style attention with Qwen3's per-head q/k norms before RoPE, four
// zero-centred RMSNorms a layer (pre and post the attention and the MLP), embeddings scaled by
// sqrt(hidden), a GELU-tanh gated MLP (config hidden_activation), the attention scale from
// query_pre_attn_scalar, and sliding-window layers with their own RoPE base (model_config_gemma.cc).
// Gemma3ForConditionalGeneration (4B and up) is read for its text model: weights under
// language_model.model.* (the hub's files, and what transformers 5.17 saves) or model.language_model.*.
// Gemma (1): Llama's layer (two pre-norms) with the zero-centred norms, scaled embeddings and GELU-tanh MLP.
// Gemma 2: the same layer as Gemma 3 without the q/k norms, every other layer sliding, tanh soft-capping of the
// attention scores and the final logits (model_config_gemma.cc).
#include "model/arch_spec.h"

namespace vireo {
void register_gemma_family(std::vector<ArchSpec>& out) {
  ArchSpec g1;  // Gemma (1): Llama's pre-norm layer with zero-centred norms and scaled embeddings
  g1.name = "GemmaForCausalLM";
  g1.zero_centred_norm = true;
  g1.scaled_embedding = true;
  out.push_back(g1);
  ArchSpec g2;
  g2.name = "Gemma2ForCausalLM";
  g2.sandwich_norm = true;
  g2.zero_centred_norm = true;
  g2.scaled_embedding = true;
  out.push_back(g2);
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
