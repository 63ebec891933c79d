// Multimodal wrappers served as their text model, whose fields sit in text_config:
// Qwen3-VL / Qwen3-VL-MoE (Qwen3VLConfig / Qwen3VLMoeConfig; Qwen3VLTextConfig is Qwen3's, with M-RoPE
// sections in its rope parameters, which text-only positions reduce to plain RoPE; the MoE text model
// renormalises its top-k by default), Qwen2-VL / Qwen2.5-VL (a Qwen2 text model) and Mistral 3
// (Mistral3Config: a MistralConfig text model).
#include <string>

#include "model/config_json.h"
#include "model/model_config.h"

namespace vireo::config_json {

bool is_qwen3_vl(const std::string& a, const std::string& t) {
  return a == "Qwen3VLForConditionalGeneration" || a == "Qwen3VLMoeForConditionalGeneration" || t == "qwen3_vl" ||
         t == "qwen3_vl_moe" || t == "qwen3_vl_text" || t == "qwen3_vl_moe_text";
}

json qwen3_vl_normalize(const json& in, const std::string& source) {
  json j = lift_text_config(in, source);
  if (has(j, "num_experts") && !has(j, "norm_topk_prob")) j["norm_topk_prob"] = true;  // Qwen3VLMoeTextConfig
  if (!has(j, "head_dim")) j["head_dim"] = 128;
  return j;
}

bool is_qwen2_vl(const std::string& a, const std::string& t) {
  return a == "Qwen2VLForConditionalGeneration" || a == "Qwen2_5_VLForConditionalGeneration" || t == "qwen2_vl" ||
         t == "qwen2_5_vl" || t == "qwen2_vl_text" || t == "qwen2_5_vl_text";
}

// Qwen2-VL / Qwen2.5-VL: a Qwen2 text model, flat in the hub's configs (transformers 4) or in text_config
// (transformers 5). Their M-RoPE is written {"type": "mrope", "mrope_section": [...]} in the hub's files
// (transformers reads it as "default"): text positions give the three sections one position, plain RoPE.
json qwen2_vl_normalize(const json& in, const std::string& source) {
  json j = lift_text_config(in, source);
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    auto r = j.find(key);
    if (r == j.end() || !r->is_object()) continue;
    for (const char* t : {"type", "rope_type"})
      if (r->contains(t) && (*r)[t] == "mrope") (*r)[t] = "default";
  }
  return j;
}

bool is_mistral3(const std::string& a, const std::string& t) {
  return a == "Mistral3ForConditionalGeneration" || t == "mistral3";
}

json mistral3_normalize(const json& in, const std::string& source) { return lift_text_config(in, source); }

}  // namespace vireo::config_json
