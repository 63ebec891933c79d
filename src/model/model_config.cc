// config.json / generation_config.json parsing (HF field names, old and new spellings).
#include "model/model_config.h"

#include <algorithm>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "model/config_json.h"

namespace vireo {
using namespace config_json;
namespace {

using nlohmann::json;

// eos_token_id: int or list of ints.
std::vector<int32_t> token_id_list(const json& j, const std::string& source, const std::string& key) {
  std::vector<int32_t> out;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return out;
  if (it->is_number_integer()) {
    out.push_back(it->get<int32_t>());
  } else if (it->is_array()) {
    for (const auto& v : *it) {
      if (!v.is_number_integer()) fail(source, key, "must be an int or a list of ints");
      out.push_back(v.get<int32_t>());
    }
  } else {
    fail(source, key, "must be an int or a list of ints");
  }
  return out;
}

json read_json_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw Error(path + ": cannot open file");
  try {
    return json::parse(f);
  } catch (const json::exception& e) {
    throw Error(path + ": malformed JSON (" + std::string(e.what()) + ")");
  }
}

RopeScaling parse_rope(const json& r, const std::string& source, const std::string& field) {
  RopeScaling rs;
  if (!r.is_object()) fail(source, field, "must be an object");
  if (r.contains("rope_type") && r["rope_type"].is_string()) {
    rs.type = r["rope_type"].get<std::string>();
  } else if (r.contains("type") && r["type"].is_string()) {
    rs.type = r["type"].get<std::string>();
  }
  if (rs.type == "su") rs.type = "longrope";  // Phi-3's first name for it
  if (rs.type != "default" && rs.type != "linear" && rs.type != "dynamic" && rs.type != "llama3" && rs.type != "yarn" &&
      rs.type != "longrope")
    fail(source, field + ".rope_type",
         "'" + rs.type + "' is not supported (default, linear, dynamic, llama3, yarn, longrope)");
  if (rs.type == "longrope") {
    for (auto [key, out] : {std::pair<const char*, std::vector<float>*>{"short_factor", &rs.short_factor},
                            {"long_factor", &rs.long_factor}}) {
      const auto f = r.find(key);
      if (f == r.end() || !f->is_array() || f->empty())
        fail(source, field + "." + key, "must be a list of numbers (longrope)");
      for (const auto& v : *f) {
        if (!v.is_number() || !(v.get<double>() > 0)) fail(source, field + "." + key, "must hold numbers > 0");
        out->push_back(v.get<float>());
      }
    }
  }
  rs.factor_set = r.contains("factor") && !r["factor"].is_null();
  if (rs.factor_set) rs.factor = get_float(r, source, "factor", 1.0f);
  rs.low_freq_factor = get_float(r, source, "low_freq_factor", 1.0f);
  rs.high_freq_factor = get_float(r, source, "high_freq_factor", 4.0f);
  rs.original_max_position_embeddings = get_int(r, source, "original_max_position_embeddings", 0);
  rs.beta_fast = get_float(r, source, "beta_fast", 32.0f);
  rs.beta_slow = get_float(r, source, "beta_slow", 1.0f);
  rs.attention_factor = opt_float(r, source, "attention_factor");
  rs.mscale = opt_float(r, source, "mscale");
  rs.mscale_all_dim = opt_float(r, source, "mscale_all_dim");
  rs.truncate = get_bool(r, source, "truncate", true);
  rs.alpha = opt_float(r, source, "alpha");
  if (rs.type == "llama3" && rs.original_max_position_embeddings <= 0)
    fail(source, field + ".original_max_position_embeddings", "is required for llama3 rope");
  // YaRN may leave the factor out when both context lengths are given (transformers derives it from them).
  const bool derived = rs.type == "yarn" && !rs.factor_set && rs.original_max_position_embeddings > 0;
  if ((rs.type == "linear" || rs.type == "llama3" || rs.type == "yarn") && !derived && !(rs.factor > 0))
    fail(source, field + ".factor", "must be > 0");
  return rs;
}

}  // namespace

// The MoE fields, when the config has experts (validated only then: dense configs may carry stray keys).
static void parse_moe(const json& j, const std::string& source, ModelConfig& c) {
  const char* experts_key = j.contains("num_experts") ? "num_experts" : "num_local_experts";
  if (!j.contains(experts_key) || j[experts_key].is_null()) return;
  c.num_experts = get_int(j, source, experts_key);
  if (c.num_experts <= 0) return;
  c.num_experts_per_tok = get_int(j, source, "num_experts_per_tok");
  if (c.num_experts_per_tok <= 0 || c.num_experts_per_tok > c.num_experts)
    fail(source, "num_experts_per_tok", "must be in [1, num_experts]");
  // Mixtral: every expert is intermediate_size wide and the top-k weights are always renormalised
  // (MixtralSparseMoeBlock); its config has neither key.
  // GPT-OSS and GraniteMoe: the same (GptOssTopKRouter, GraniteMoeTopKGating: a softmax over the top-k logits).
  // OLMoE: the same widths (its router renormalises only with norm_topk_prob).
  const bool olmoe = c.architecture == "OlmoeForCausalLM" || c.model_type == "olmoe";
  const bool mixtral = c.architecture == "MixtralForCausalLM" || c.model_type == "mixtral" ||
                       config_json::is_gpt_oss(c.architecture, c.model_type) ||
                       config_json::is_granite_moe(c.architecture, c.model_type);
  c.moe_intermediate_size = mixtral || olmoe ? c.intermediate_size : get_int(j, source, "moe_intermediate_size");
  if (c.moe_intermediate_size <= 0)
    fail(source, mixtral || olmoe ? "intermediate_size" : "moe_intermediate_size", "must be > 0");
  if (olmoe && has(j, "clip_qkv")) fail(source, "clip_qkv", "is not supported (null only)");
  c.norm_topk_prob = mixtral || get_bool(j, source, "norm_topk_prob", false);
  // Qwen2-MoE's shared expert (Qwen3-Next reads the same key in parse_qwen3_next).
  if (c.architecture == "Qwen2MoeForCausalLM" || c.model_type == "qwen2_moe") {
    c.shared_expert_intermediate_size = get_int(j, source, "shared_expert_intermediate_size", 0);
    if (c.shared_expert_intermediate_size < 0) fail(source, "shared_expert_intermediate_size", "must be >= 0");
  }
  c.decoder_sparse_step = get_int(j, source, "decoder_sparse_step", 1);
  if (c.decoder_sparse_step <= 0) fail(source, "decoder_sparse_step", "must be > 0");
  auto only = j.find("mlp_only_layers");
  if (only != j.end() && !only->is_null()) {
    if (!only->is_array()) fail(source, "mlp_only_layers", "must be a list of layer indices");
    for (const auto& v : *only) {
      if (!v.is_number_integer()) fail(source, "mlp_only_layers", "must be a list of layer indices");
      c.mlp_only_layers.push_back(v.get<int>());
    }
  }
}

namespace {
// HF's rules: `layer_types` (transformers >= 4.54 writes it) names each layer's attention; without it,
// Mistral-style configs slide on every layer when sliding_window is set, and Qwen2-style configs only
// when use_sliding_window is true, on layers >= max_window_layers. Sets c.sliding_window and
// c.sliding_layers (c.num_hidden_layers is known).
void parse_sliding_window(const json& j, const std::string& source, ModelConfig& c) {
  const int n = c.num_hidden_layers;
  c.sliding_window = 0;
  c.sliding_layers.clear();
  auto sw = j.find("sliding_window");
  if (sw == j.end() || sw->is_null()) return;
  const int window = get_int(j, source, "sliding_window");
  if (window <= 0) return;
  std::vector<uint8_t> slides(n, 0);
  if (auto lt = j.find("layer_types"); lt != j.end() && lt->is_array()) {
    for (int l = 0; l < n && l < static_cast<int>(lt->size()); ++l)
      slides[l] = (*lt)[l].is_string() && (*lt)[l].get<std::string>() == "sliding_attention";
  } else if (j.contains("use_sliding_window")) {
    if (get_bool(j, source, "use_sliding_window", false))
      for (int l = std::max(0, get_int(j, source, "max_window_layers", n)); l < n; ++l) slides[l] = 1;
  } else {
    slides.assign(n, 1);  // Mistral / Mixtral: a non-null sliding_window applies to every layer
  }
  if (std::find(slides.begin(), slides.end(), 1) == slides.end()) return;
  c.sliding_window = window;
  c.sliding_layers = std::move(slides);
}
}  // namespace

namespace {
// A family's config hooks (model_config_<family>.cc): which configs it claims, the normalised copy
// read before the generic parse (normalize may be null: the file as it is), its own fields after it (parse
// may be null).
struct FamilyConfig {
  bool (*is)(const std::string& architecture, const std::string& model_type);
  json (*normalize)(const json& in, const std::string& source);
  void (*parse)(const json& j, const std::string& source, ModelConfig& c);
};
bool is_lfm2(const std::string& a, const std::string& t) {
  return a == "Lfm2ForCausalLM" || t == "lfm2" || config_json::is_lfm2_moe(a, t);
}
const FamilyConfig kFamilyConfigs[] = {
    {is_lfm2, lfm2_normalize, parse_lfm2},          {is_qwen3_next, qwen3_next_normalize, parse_qwen3_next},
    {is_gemma3, gemma3_normalize, parse_gemma3},    {is_gemma2, gemma2_normalize, parse_gemma2},
    {is_gemma1, gemma1_normalize, nullptr},
    {is_smollm3, smollm3_normalize, parse_smollm3}, {is_glm, glm_normalize, nullptr},
    {is_gpt_oss, gpt_oss_normalize, parse_gpt_oss},  {is_granite, nullptr, parse_granite},
    {is_olmo3, olmo3_normalize, parse_olmo3},           {is_exaone4, exaone4_normalize, parse_exaone4},           {is_qwen3_vl, qwen3_vl_normalize, nullptr},
    {is_mistral3, mistral3_normalize, nullptr},     {is_qwen2_vl, qwen2_vl_normalize, nullptr},     {is_ernie4_5, ernie4_5_normalize, parse_ernie4_5},           {is_glm4_moe, glm4_moe_normalize, parse_glm4_moe},
    {is_olmoe, olmoe_normalize, nullptr},           {is_hunyuan, hunyuan_normalize, parse_hunyuan},
};
}  // namespace

ModelConfig ModelConfig::from_json(const json& in, const std::string& source) {
  if (!in.is_object()) throw Error(source + ": config must be a JSON object");
  ModelConfig c;
  c.raw = in;
  auto arch = in.find("architectures");
  if (arch == in.end() || !arch->is_array() || arch->empty() || !(*arch)[0].is_string())
    fail(source, "architectures", "must be a non-empty list of names");
  c.architecture = (*arch)[0].get<std::string>();
  if (in.contains("model_type") && in["model_type"].is_string()) c.model_type = in["model_type"].get<std::string>();
  // Families that spell fields their own way or leave them to their config class's defaults: read a
  // normalised copy (raw keeps the file as given), then their own fields after the generic parse.
  const FamilyConfig* family = nullptr;
  for (const FamilyConfig& f : kFamilyConfigs)
    if (f.is(c.architecture, c.model_type)) family = &f;
  const bool normalizes = family && family->normalize;
  const json normalized = normalizes ? family->normalize(in, source) : json();
  const json& j = normalizes ? normalized : in;
  c.vocab_size = get_int(j, source, "vocab_size");
  c.hidden_size = get_int(j, source, "hidden_size");
  c.intermediate_size = get_int(j, source, "intermediate_size");
  c.num_hidden_layers = get_int(j, source, "num_hidden_layers");
  c.num_attention_heads = get_int(j, source, "num_attention_heads");
  c.num_key_value_heads = get_int(j, source, "num_key_value_heads", c.num_attention_heads);
  for (auto [name, v] : {std::pair<const char*, int>{"vocab_size", c.vocab_size}, {"hidden_size", c.hidden_size},
                         {"intermediate_size", c.intermediate_size}, {"num_hidden_layers", c.num_hidden_layers},
                         {"num_attention_heads", c.num_attention_heads},
                         {"num_key_value_heads", c.num_key_value_heads}})
    if (v <= 0) fail(source, name, "must be > 0");
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    fail(source, "num_key_value_heads", "must divide num_attention_heads");
  if (c.hidden_size % c.num_attention_heads != 0 && !j.contains("head_dim"))
    fail(source, "head_dim", "is missing and hidden_size is not divisible by num_attention_heads");
  c.head_dim = get_int(j, source, "head_dim", c.hidden_size / c.num_attention_heads);
  if (c.head_dim <= 0 || c.head_dim % 2 != 0) fail(source, "head_dim", "must be a positive even number");
  c.max_position_embeddings = get_int(j, source, "max_position_embeddings", 2048);
  if (c.max_position_embeddings <= 0) fail(source, "max_position_embeddings", "must be > 0");
  c.rms_norm_eps = get_float(j, source, "rms_norm_eps", 1e-6f);
  c.tie_word_embeddings = get_bool(j, source, "tie_word_embeddings", false);
  if (j.contains("dtype") && j["dtype"].is_string()) {
    c.torch_dtype = j["dtype"].get<std::string>();
  } else if (j.contains("torch_dtype") && j["torch_dtype"].is_string()) {
    c.torch_dtype = j["torch_dtype"].get<std::string>();
  }
  c.eos_token_ids = token_id_list(j, source, "eos_token_id");
  auto bos = token_id_list(j, source, "bos_token_id");
  if (!bos.empty()) c.bos_token_id = bos[0];

  // RoPE: transformers >= 5 writes rope_parameters {rope_type, rope_theta, ...}; older configs
  // have top-level rope_theta and an optional rope_scaling object.
  c.rope_theta = get_float(j, source, "rope_theta", 10000.0f);
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) continue;
    c.rope_scaling = parse_rope(*it, source, key);
    if (it->contains("rope_theta")) c.rope_theta = get_float(*it, source, "rope_theta", c.rope_theta);
    if (it->contains("partial_rotary_factor"))
      c.partial_rotary_factor = get_float(*it, source, "partial_rotary_factor", 1.0f);
    break;
  }
  if (!(c.rope_theta > 0)) fail(source, "rope_theta", "must be > 0");
  // Phi-3 keeps the pretrained context length beside the rope object (longrope's short / long switch).
  if (c.rope_scaling.type == "longrope" && c.rope_scaling.original_max_position_embeddings <= 0)
    c.rope_scaling.original_max_position_embeddings = get_int(j, source, "original_max_position_embeddings", 0);
  c.partial_rotary_factor = get_float(j, source, "partial_rotary_factor", c.partial_rotary_factor);
  if (!(c.partial_rotary_factor > 0 && c.partial_rotary_factor <= 1) || c.rotary_dim() % 2 != 0)
    fail(source, "partial_rotary_factor", "must be in (0, 1] and give an even rotary dimension");
  c.attention_bias = get_bool(j, source, "attention_bias", false);
  c.attention_out_bias = get_bool(j, source, "attention_out_bias", false);  // Seed-OSS
  c.mlp_bias = get_bool(j, source, "mlp_bias", false);
  c.qkv_bias_off = !get_bool(j, source, "qkv_bias", true);
  if (j.contains("hidden_act") && j["hidden_act"].is_string()) c.hidden_act = j["hidden_act"].get<std::string>();
  if (c.hidden_act != "silu" && c.hidden_act != "swish" && c.hidden_act != "gelu_pytorch_tanh" &&
      c.hidden_act != "gelu_new")
    fail(source, "hidden_act", "'" + c.hidden_act + "' is not supported (silu, gelu_pytorch_tanh, gelu_new)");
  parse_moe(j, source, c);
  parse_sliding_window(j, source, c);
  if (family && family->parse) family->parse(j, source, c);
  if (c.architecture == "DeepseekV3ForCausalLM" || c.model_type == "deepseek_v3" ||
      c.architecture == "DeepseekV2ForCausalLM" || c.model_type == "deepseek_v2")
    parse_deepseek(j, source, c);
  return c;
}

bool ModelConfig::moe_layer(int l) const {
  if (l < first_k_dense_replace) return false;
  if (num_experts <= 0 || decoder_sparse_step <= 0 || (l + 1) % decoder_sparse_step != 0) return false;
  return std::find(mlp_only_layers.begin(), mlp_only_layers.end(), l) == mlp_only_layers.end();
}

ModelConfig ModelConfig::from_file(const std::string& path, const json& overrides) {
  if (overrides.is_null() || overrides.empty()) return from_json(read_json_file(path), path);
  return from_json(with_overrides(read_json_file(path), overrides), path + " with --hf-overrides");
}

json ModelConfig::with_overrides(json config, const json& overrides) {
  if (overrides.is_null()) return config;
  if (!overrides.is_object()) throw Error("--hf-overrides: must be a JSON object, got " + overrides.dump());
  for (const auto& [key, value] : overrides.items()) {
    auto it = config.find(key);
    if (value.is_object() && it != config.end() && it->is_object()) {
      *it = with_overrides(*it, value);
    } else {
      config[key] = value;
    }
  }
  return config;
}

GenerationConfig GenerationConfig::from_dir(const std::string& model_dir) {
  GenerationConfig g;
  const std::string path = (std::filesystem::path(model_dir) / "generation_config.json").string();
  if (!std::filesystem::exists(path)) return g;
  json j = read_json_file(path);
  if (!j.is_object()) throw Error(path + ": must be a JSON object");
  g.apply_json(j, path);
  return g;
}

void GenerationConfig::apply_json(const json& j, const std::string& source) {
  if (j.contains("eos_token_id")) eos_token_ids = token_id_list(j, source, "eos_token_id");
  for (auto [key, field] : {std::pair{"temperature", &temperature}, std::pair{"top_p", &top_p},
                            std::pair{"min_p", &min_p}, std::pair{"repetition_penalty", &repetition_penalty}})
    if (j.contains(key)) *field = opt_float(j, source, key);
  if (j.contains("top_k")) top_k = j["top_k"].is_null() ? std::nullopt : std::optional<int>(get_int(j, source, "top_k"));
}

}  // namespace vireo
