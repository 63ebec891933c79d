// HunYuan v1 config.json fields (transformers' HunYuanDenseV1Config / HunYuanMoEV1Config). Both default
// rms_norm_eps to 1e-5. The MoE config names its fields its own way and may give them per layer (lists,
// as Hunyuan-A13B's hub config does); they are read into the generic MoE keys:
//   num_experts, moe_topk -> num_experts_per_tok, moe_intermediate_size (absent: intermediate_size, the
//   width transformers gives every expert), num_shared_expert (default 1) -> the shared MLP's width
//   intermediate_size * num_shared_expert (vLLM's rule; transformers' one shared MLP is that with 1).
// transformers renormalises the top-k weights for every k (routing_weights /= sum), so norm_topk_prob.
// Its router (HunYuanMoEV1Gate) is an fp32 Linear fed hidden_states.float(), and the softmax, top-k and
// renormalised weights stay fp32 (they take the logits' dtype): MoeScoring::kSoftmaxFp32, which differs
// from kSoftmax (logits rounded to the activation dtype) only in bf16 / f16 runs.
#include "model/config_json.h"
#include "model/model_config.h"

namespace vireo::config_json {

namespace {
bool is_hunyuan_moe(const std::string& a, const std::string& t) {
  return a == "HunYuanMoEV1ForCausalLM" || t == "hunyuan_v1_moe";
}

std::string string_or_empty(const json& v) { return v.is_string() ? v.get<std::string>() : std::string(); }

// A field that is an integer or a per-layer list of them; layers must agree (one expert layout a model).
void lift_per_layer(json& j, const std::string& source, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return;
  if (it->empty() || !(*it)[0].is_number_integer()) fail(source, key, "must be an integer or a list of integers");
  for (const auto& v : *it)
    if (v != (*it)[0]) fail(source, key, "differs between layers, which is not supported");
  *it = json((*it)[0]);
}
}  // namespace

bool is_hunyuan(const std::string& a, const std::string& t) {
  return a == "HunYuanDenseV1ForCausalLM" || t == "hunyuan_v1_dense" || is_hunyuan_moe(a, t);
}

json hunyuan_normalize(const json& in, const std::string& source) {
  json j = in;
  if (!has(j, "rms_norm_eps")) j["rms_norm_eps"] = 1e-5;
  auto archs = j.find("architectures");
  const std::string arch = archs != j.end() && archs->is_array() && !archs->empty() ? string_or_empty((*archs)[0]) : "";
  const std::string type = j.contains("model_type") ? string_or_empty(j["model_type"]) : "";
  if (!is_hunyuan_moe(arch, type)) return j;
  for (const char* key : {"num_experts", "moe_topk", "moe_intermediate_size", "num_shared_expert"})
    lift_per_layer(j, source, key);
  if (!has(j, "num_experts")) j["num_experts"] = 1;  // HunYuanMoEV1Config's defaults
  // (a GGUF file's config, gguf_config.cc, already has num_experts_per_tok)
  if (has(j, "moe_topk") || !has(j, "num_experts_per_tok")) j["num_experts_per_tok"] = has(j, "moe_topk") ? j["moe_topk"] : json(1);
  if (!has(j, "moe_intermediate_size") && has(j, "intermediate_size")) j["moe_intermediate_size"] = j["intermediate_size"];
  j["norm_topk_prob"] = true;
  j.erase("mlp_only_layers");  // not a HunYuan field: every layer is sparse
  j.erase("decoder_sparse_step");
  return j;
}

void parse_hunyuan(const json& j, const std::string& source, ModelConfig& c) {
  if (!is_hunyuan_moe(c.architecture, c.model_type) || c.num_experts <= 0) return;
  const int shared = get_int(j, source, "num_shared_expert", 1);
  if (shared < 0) fail(source, "num_shared_expert", "must be >= 0");
  c.shared_expert_intermediate_size = c.intermediate_size * shared;
  c.moe_softmax_fp32 = true;
  c.moe_renorm_eps = 0.0f;  // routing_weights /= sum, no epsilon
}

}  // namespace vireo::config_json
