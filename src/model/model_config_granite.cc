// Granite's config.json (transformers' GraniteConfig, IBM Granite 3.x dense; GraniteMoeConfig the same with
// Mixtral's experts, num_local_experts of intermediate_size each, top-k renormalised): Llama's fields plus four
// scalars, each 1 when absent: embedding_multiplier (embeddings scaled), attention_multiplier (the
// softmax scale itself, not a factor on head_dim^-0.5), residual_multiplier (each attention / MLP output
// scaled before its residual add) and logits_scaling (logits divided by it).
#include <string>
#include <utility>

#include "model/config_json.h"
#include "model/model_config.h"

namespace vireo::config_json {

bool is_granite(const std::string& a, const std::string& t) {
  return a == "GraniteForCausalLM" || t == "granite" || is_granite_moe(a, t);
}
bool is_granite_moe(const std::string& a, const std::string& t) {
  return a == "GraniteMoeForCausalLM" || t == "granitemoe";
}

void parse_granite(const json& j, const std::string& source, ModelConfig& c) {
  c.embedding_multiplier = get_float(j, source, "embedding_multiplier", 1.0f);
  c.attention_scale = get_float(j, source, "attention_multiplier", 1.0f);
  c.residual_multiplier = get_float(j, source, "residual_multiplier", 1.0f);
  c.logits_scaling = get_float(j, source, "logits_scaling", 1.0f);
  for (auto [key, v] : {std::pair<const char*, float>{"embedding_multiplier", c.embedding_multiplier},
                        {"attention_multiplier", c.attention_scale},
                        {"residual_multiplier", c.residual_multiplier},
                        {"logits_scaling", c.logits_scaling}})
    if (!(v > 0)) fail(source, key, "must be > 0");
}

}  // namespace vireo::config_json
