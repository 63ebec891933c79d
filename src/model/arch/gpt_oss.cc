// GPT-OSS (GptOssForCausalLM, gpt-oss-20b / 120b): Llama's pre-norm layer with q/k/v/o biases, a
// per-head attention sink (self_attn.sinks [H], AttentionParams::sinks), every other layer sliding
// (window 128), YaRN RoPE, and a MoE MLP on every layer: mlp.router (linear with bias, softmax over
// the top-k logits) and experts with biases and a clamped SwiGLU (MoeParams; loading in
// decoder_gpt_oss.cc). Config defaults: model_config_gpt_oss.cc.
#include "model/arch_spec.h"

namespace vireo {
void register_gpt_oss_family(std::vector<ArchSpec>& out) {
  ArchSpec s;
  s.name = "GptOssForCausalLM";
  s.moe = true;
  s.gpt_oss_experts = true;
  out.push_back(s);
}
}  // namespace vireo
