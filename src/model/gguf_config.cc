#include "model/gguf_config.h"

#include "model/gguf_config_arch.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/error.h"
#include "gguf/gguf_dequant.h"

namespace vireo {
namespace {

using nlohmann::json;

// general.architecture -> HF name. llama.cpp's converter writes Mistral checkpoints as "llama" too.
const std::pair<const char*, const char*> kArchitectures[] = {
    {"llama", "LlamaForCausalLM"},
    {"qwen2", "Qwen2ForCausalLM"},
    {"qwen3", "Qwen3ForCausalLM"},
    {"olmo2", "Olmo2ForCausalLM"},
    // OLMoE (convert_hf_to_gguf.py's OlmoeModel): full-width q/k norms as OLMo-2, pre-norm layers, every layer
    // sparse with the experts feed_forward_length wide (no expert_feed_forward_length), weights not renormalised.
    {"olmoe", "OlmoeForCausalLM"},
    // EXAONE 4.0 (convert_hf_to_gguf.py's Exaone4Model): OLMo-2's post-norms (post_attention_norm,
    // post_ffw_norm) and per-head q/k norms, NeoX RoPE (llama3 scaling as rope_freqs), the sliding layers
    // in attention.sliding_window_pattern; the global layers take no RoPE when a window is set.
    {"exaone4", "Exaone4ForCausalLM"},
    {"qwen3moe", "Qwen3MoeForCausalLM"},
    // Qwen3-VL's text models (convert_hf_to_gguf.py's Qwen3VLTextModel: Qwen3's tensors; the vision tower and
    // its deepstack mergers go to the mmproj file; M-RoPE sections reduce to plain RoPE for text).
    {"qwen3vl", "Qwen3ForCausalLM"},
    // Qwen2-VL / Qwen2.5-VL / Qwen2.5-Omni's thinker (convert_hf_to_gguf.py's Qwen2VLModel): Qwen2's tensors,
    // the vision tower in the mmproj file; rope.dimension_sections (M-RoPE) is plain RoPE for text.
    {"qwen2vl", "Qwen2ForCausalLM"},
    {"qwen3vlmoe", "Qwen3MoeForCausalLM"},
    {"qwen2moe", "Qwen2MoeForCausalLM"},
    {"gemma3", "Gemma3ForCausalLM"},
    {"gemma2", "Gemma2ForCausalLM"},
    {"gemma", "GemmaForCausalLM"},  // Gemma (1): NeoX RoPE, norms stored as 1 + w, GELU-tanh
    {"phi3", "Phi3ForCausalLM"},
    {"gpt-oss", "GptOssForCausalLM"},
    {"granite", "GraniteForCausalLM"},
    {"granitemoe", "GraniteMoeForCausalLM"},
    {"hunyuan-dense", "HunYuanDenseV1ForCausalLM"},
    {"hunyuan-moe", "HunYuanMoEV1ForCausalLM"},
    {"lfm2", "Lfm2ForCausalLM"},
    {"lfm2moe", "Lfm2MoeForCausalLM"},
    {"glm4moe", "Glm4MoeForCausalLM"},
    // GLM-4-0414 (convert_hf_to_gguf.py's Glm4Model): the HF tensors unpermuted (GPT-J RoPE over
    // rope.dimension_count of each head), q/k/v biases, [gate; up] fused in ffn_up, sandwich norms
    // post_attention_norm / post_ffw_norm.
    {"glm4", "Glm4ForCausalLM"},
    {"seed_oss", "SeedOssForCausalLM"},  // Llama's tensors (no Q/K permutation), q/k/v biases
    {"deepseek2", "DeepseekV3ForCausalLM"},  // or V2: by expert_gating_func (gguf_config_deepseek2.cc)
    {"qwen3next", "Qwen3NextForCausalLM"},
    {"qwen35", "Qwen3_5ForCausalLM"},
    {"qwen35moe", "Qwen3_5MoeForCausalLM"},
    // SmolLM3: Llama's tensors (Q/K rows permuted), no RoPE on every 4th layer; llama.cpp hard-codes that
    // step (no metadata key), and so does SmolLM3Config's default no_rope_layer_interval.
    {"smollm3", "SmolLM3ForCausalLM"},
    // ERNIE 4.5 (convert_hf_to_gguf.py's Ernie4_5Model / Ernie4_5MoeModel): the HF tensors unpermuted (GPT-J
    // pair RoPE as transformers runs it), biases where use_bias; the MoE's keys in ernie_fields.
    {"ernie4_5", "Ernie4_5ForCausalLM"},
    {"ernie4_5-moe", "Ernie4_5_MoeForCausalLM"},
};

// ERNIE 4.5: use_bias as the tensors tell (model_config_ernie.cc maps it onto every projection); the MoE's
// layout in Ernie4_5_MoeConfig's own keys, which model_config_ernie.cc reads: expert_count, expert_used_count,
// expert_feed_forward_length, expert_shared_count, leading_dense_block_count (moe_layer_start_index) and
// interleave_moe_layer_step (moe_layer_interval); the MoE layers run to the last one (the converter writes
// no end index); the choice bias is exp_probs_b.
void ernie_fields(const GgufFile& f, const GgufShards& m, const std::string& a, json& j) {
  j["use_bias"] = m.find_tensor("blk.0.attn_q.bias").info != nullptr;
  if (a != "ernie4_5-moe") return;
  j["moe_num_experts"] = gguf_required_int(f, a + ".expert_count");
  j["moe_k"] = gguf_required_int(f, a + ".expert_used_count");
  j["moe_intermediate_size"] = gguf_required_int(f, a + ".expert_feed_forward_length");
  j["moe_num_shared_experts"] = f.get_int(a + ".expert_shared_count").value_or(0);
  j["moe_layer_start_index"] = f.get_int(a + ".leading_dense_block_count").value_or(0);
  j["moe_layer_interval"] = f.get_int(a + ".interleave_moe_layer_step").value_or(1);
}

// Gemma 2 and 3 as llama.cpp runs them (llama-model.cpp, LLM_ARCH_GEMMA2 / GEMMA3): sliding layers by a
// period of 2 (Gemma 2: every other layer global) or 6 (Gemma 3: every 6th) unless
// <arch>.attention.sliding_window_pattern says otherwise (a period, or one flag per layer, true = sliding);
// Gemma 3's local layers' RoPE base 10,000 (or rope.freq_base_swa); the softmax scale
// <arch>.attention.scale where written, else 1/sqrt(head_dim), and 1/sqrt(hidden / heads) for the 27Bs
// (46 layers for Gemma 2, 62 for Gemma 3), as llama.cpp computes it; Gemma 2's soft-capping from
// <arch>.attn_logit_softcapping / final_logit_softcapping (absent: 50 / 30, Gemma2Config's and llama.cpp's
// defaults); GELU-tanh MLP; norms stored as 1 + w (GgufWeights).
void gemma_fields(const GgufFile& f, const std::string& a, json& j) {
  const bool gemma2 = a == "gemma2";
  const int64_t n = j["num_hidden_layers"].get<int64_t>();
  std::vector<bool> sliding(static_cast<size_t>(n));
  const std::string pk = a + ".attention.sliding_window_pattern";
  const GgufValue* pv = f.find(pk);
  if (pv && pv->type == GgufType::kArray) {
    if (!pv->value.is_array() || static_cast<int64_t>(pv->value.size()) != n)
      throw Error(f.path() + ": metadata '" + pk + "' must hold one flag per layer");
    for (int64_t l = 0; l < n; ++l) sliding[l] = pv->value[l].is_boolean() ? pv->value[l].get<bool>() : pv->value[l] != 0;
  } else {
    const int64_t period = pv ? *f.get_int(pk) : gemma2 ? 2 : 6;
    if (period <= 0) throw Error(f.path() + ": metadata '" + pk + "' must be > 0");
    for (int64_t l = 0; l < n; ++l) sliding[l] = (l + 1) % period != 0;
  }
  json types = json::array();
  for (bool s : sliding) types.push_back(s ? "sliding_attention" : "full_attention");
  j["layer_types"] = types;
  if (!j.contains("sliding_window")) j["sliding_window"] = nullptr;  // no window key: every layer global
  if (gemma2) {
    for (const char* key : {"attn_logit_softcapping", "final_logit_softcapping"})
      if (auto v = f.get_float(a + "." + key)) j[key] = *v;
  } else {
    j["rope_local_base_freq"] = f.get_float(a + ".rope.freq_base_swa").value_or(10000.0);
  }
  const int64_t hidden = j["hidden_size"].get<int64_t>(), heads = j["num_attention_heads"].get<int64_t>();
  if (auto scale = f.get_float(a + ".attention.scale"); scale && *scale > 0) {
    j["query_pre_attn_scalar"] = 1.0 / (*scale * *scale);
  } else {
    j["query_pre_attn_scalar"] = n == (gemma2 ? 46 : 62) ? hidden / heads : j["head_dim"].get<int64_t>();
  }
  j["hidden_activation"] = "gelu_pytorch_tanh";
}

// A per-layer integer key: one value for every layer, or an array of one per layer (any integer type).
std::vector<int64_t> per_layer_ints(const GgufFile& f, const std::string& key, int64_t num_layers) {
  const GgufValue* v = f.find(key);
  if (!v) throw Error(f.path() + ": metadata '" + key + "' is missing");
  if (v->type != GgufType::kArray) return std::vector<int64_t>(static_cast<size_t>(num_layers), *f.get_int(key));
  if (!v->value.is_array() || static_cast<int64_t>(v->value.size()) != num_layers)
    throw Error(f.path() + ": metadata '" + key + "' must hold one value per layer (" + std::to_string(num_layers) + ")");
  std::vector<int64_t> out;
  for (const auto& e : v->value) {
    if (!e.is_number_integer()) throw Error(f.path() + ": metadata '" + key + "' must hold integers");
    out.push_back(e.get<int64_t>());
  }
  return out;
}

// LFM2 as convert_hf_to_gguf.py's LFM2Model writes it: attention.head_count_kv per layer, 0 on the
// short-convolution layers (how llama.cpp tells them apart); shortconv.l_cache; the MLP width already
// adjusted (block_ff_dim's rule applied by the converter); the final norm as token_embd_norm.
void lfm2_fields(const GgufShards& m, const std::string& a, json& j) {
  const GgufFile& f = m.first();
  const int64_t n = j["num_hidden_layers"].get<int64_t>();
  const std::vector<int64_t> kv = per_layer_ints(f, a + ".attention.head_count_kv", n);
  json types = json::array();
  int64_t kv_heads = 0;
  for (int64_t h : kv) {
    if (h < 0 || (h > 0 && kv_heads > 0 && h != kv_heads))
      throw Error(f.path() + ": metadata '" + a + ".attention.head_count_kv' must be 0 (conv) or one head count");
    if (h > 0) kv_heads = h;
    types.push_back(h == 0 ? "conv" : "full_attention");
  }
  j["layer_types"] = types;
  j["num_key_value_heads"] = kv_heads > 0 ? kv_heads : j["num_attention_heads"].get<int64_t>();
  j["conv_L_cache"] = gguf_required_int(f, a + ".shortconv.l_cache");
  j["block_auto_adjust_ff_dim"] = false;  // feed_forward_length is the width itself
  j["norm_eps"] = j.value("rms_norm_eps", 1e-5);  // Lfm2Config's name
  bool bias = false;
  for (int64_t l = 0; l < n; ++l)
    if (kv[l] == 0) bias = m.find_tensor("blk." + std::to_string(l) + ".shortconv.in_proj.bias").info != nullptr;
  j["conv_bias"] = bias;
  if (a != "lfm2moe") return;
  // LFM2-MoE (convert_hf_to_gguf.py's LFM2MoeModel): leading_dense_block_count dense layers, a sigmoid
  // router (expert_gating_func 2), the expert bias as exp_probs_b. The converter writes no weight scale and
  // llama.cpp scales by 1 (the released models' routed_scaling_factor); expert_weights_scale is read where
  // a file has it.
  if (auto g = f.get_int(a + ".expert_gating_func"); g && *g != 2)
    throw Error(f.path() + ": metadata '" + a + ".expert_gating_func' " + std::to_string(*g) + " is not supported (2: sigmoid)");
  const int64_t dense = f.get_int(a + ".leading_dense_block_count").value_or(0);
  j["num_dense_layers"] = dense;
  j["routed_scaling_factor"] = f.get_float(a + ".expert_weights_scale").value_or(1.0);
  j["use_expert_bias"] = dense < n && m.find_tensor("blk." + std::to_string(dense) + ".exp_probs_b.bias").info != nullptr;
  j.erase("mlp_only_layers");  // the same layers, said by num_dense_layers
}

// attention.sliding_window_pattern (one flag per layer, true = sliding) as config.json's layer_types;
// false where the file has no such array.
bool sliding_layer_types(const GgufFile& f, const std::string& a, json& j) {
  const GgufValue* pv = f.find(a + ".attention.sliding_window_pattern");
  if (!pv || pv->type != GgufType::kArray) return false;
  const int64_t n = j["num_hidden_layers"].get<int64_t>();
  if (!pv->value.is_array() || static_cast<int64_t>(pv->value.size()) != n)
    throw Error(f.path() + ": metadata '" + a + ".attention.sliding_window_pattern' must hold one flag per layer");
  json types = json::array();
  for (const auto& v : pv->value) types.push_back((v.is_boolean() ? v.get<bool>() : v != 0) ? "sliding_attention" : "full_attention");
  j["layer_types"] = types;
  return true;
}

// OLMo 3 converts as "olmo2" (convert_hf_to_gguf.py's Olmo2Model): its window in attention.sliding_window
// and which layers use it in attention.sliding_window_pattern; without the flags the window would apply
// to every layer, so none is taken (OLMo-2 files have neither key).
void olmo2_fields(const GgufFile& f, const std::string& a, json& j) {
  if (sliding_layer_types(f, a, j)) j["architectures"] = {"Olmo3ForCausalLM"};
  else j.erase("sliding_window");
}

// GLM-4.5 as convert_hf_to_gguf.py's Glm4MoeModel writes it: leading_dense_block_count dense layers, the
// DeepSeek-V3 router (expert_gating_func 2, exp_probs_b, expert_weights_scale / _norm, expert group
// counts), expert_shared_count shared experts; q/k/v biases without an o_proj one; q/k norms where
// attn_q_norm exists. The MTP layer (nextn_predict_layers) is already left out of block_count above.
void glm4moe_fields(const GgufShards& m, const std::string& a, json& j) {
  const GgufFile& f = m.first();
  if (auto g = f.get_int(a + ".expert_gating_func"); g && *g != 2)
    throw Error(f.path() + ": metadata '" + a + ".expert_gating_func' " + std::to_string(*g) + " is not supported (2: sigmoid)");
  j["first_k_dense_replace"] = f.get_int(a + ".leading_dense_block_count").value_or(0);
  j["n_shared_experts"] = f.get_int(a + ".expert_shared_count").value_or(0);
  j["routed_scaling_factor"] = f.get_float(a + ".expert_weights_scale").value_or(1.0);
  j["norm_topk_prob"] = f.get_bool(a + ".expert_weights_norm").value_or(true);
  j["n_group"] = f.get_int(a + ".expert_group_count").value_or(1);
  j["topk_group"] = f.get_int(a + ".expert_group_used_count").value_or(1);
  j["attention_bias"] = m.find_tensor("blk.0.attn_q.bias").info != nullptr;
  j["use_qk_norm"] = m.find_tensor("blk.0.attn_q_norm.weight").info != nullptr;
  j.erase("mlp_only_layers");  // the same layers, said by first_k_dense_replace
}

// llama.cpp writes rope scaling as rope.scaling.{type,factor,original_context_length,...}
// (older files: rope.scale_linear); llama3-style scaling arrives as the rope_freqs tensor instead.
json rope_scaling(const GgufFile& f, const std::string& a) {
  const auto type = f.get_string(a + ".rope.scaling.type");
  if (!type) {
    const double linear = f.get_float(a + ".rope.scale_linear").value_or(1.0);
    return linear == 1.0 ? json(nullptr) : json{{"rope_type", "linear"}, {"factor", linear}};
  }
  const double factor = f.get_float(a + ".rope.scaling.factor").value_or(1.0);
  if (*type == "none") return nullptr;
  if (*type == "linear") return {{"rope_type", "linear"}, {"factor", factor}};
  if (*type != "yarn")
    throw Error(f.path() + ": metadata '" + a + ".rope.scaling.type' '" + *type + "' is not supported (none, linear, yarn)");
  json r = {{"rope_type", "yarn"}, {"factor", factor}};
  if (auto o = f.get_int(a + ".rope.scaling.original_context_length")) r["original_max_position_embeddings"] = *o;
  // ggml multiplies its YaRN magnitude scale 0.1 ln(factor) + 1 by attn_factor; HF's
  // attention_factor replaces that scale, so it is the product.
  if (auto v = f.get_float(a + ".rope.scaling.attn_factor"))
    r["attention_factor"] = *v * (factor > 1 ? 0.1 * std::log(factor) + 1.0 : 1.0);
  if (auto v = f.get_float(a + ".rope.scaling.yarn_beta_fast")) r["beta_fast"] = *v;
  if (auto v = f.get_float(a + ".rope.scaling.yarn_beta_slow")) r["beta_slow"] = *v;
  return r;
}

std::vector<float> f32_vector(const GgufShards& m, const std::string& name, int n);
std::vector<float> rope_freq_factors(const GgufShards& m, int num_freqs) {
  return f32_vector(m, "rope_freqs.weight", num_freqs);
}

// An F32 vector tensor of n values (rope factors), empty when the file has none.
std::vector<float> f32_vector(const GgufShards& m, const std::string& name, int n) {
  const GgufShards::Found t = m.find_tensor(name);
  if (!t.info) return {};
  if (t.info->numel() != n || !ggml_can_dequantize(t.info->type))
    throw Error(t.file->path() + ": tensor '" + name + "' must hold " + std::to_string(n) + " F32 values");
  std::vector<float> out(n);
  dequantize(t.info->type, t.data(), out.data(), n);
  return out;
}

// Phi-3's LongRoPE as convert_hf_to_gguf.py's Phi3MiniModel writes it: the factors as the tensors
// rope_factors_long / rope_factors_short, the pretrained length as rope.scaling.original_context_length,
// the attention factor as rope.scaling.attn_factor. (llama.cpp picks one factor set per context size;
// vireo keeps the HF rule: short below the original length, long past it.)
void phi3_fields(const GgufShards& m, const std::string& a, int rope_dims, json& j) {
  const GgufFile& f = m.first();
  if (auto o = f.get_int(a + ".rope.scaling.original_context_length")) j["original_max_position_embeddings"] = *o;
  const auto lf = f32_vector(m, "rope_factors_long.weight", rope_dims / 2);
  const auto sf = f32_vector(m, "rope_factors_short.weight", rope_dims / 2);
  if (lf.empty() != sf.empty()) throw Error(f.path() + ": rope_factors_long and rope_factors_short come in pairs");
  if (lf.empty()) return;
  json r = {{"rope_type", "longrope"}, {"long_factor", lf}, {"short_factor", sf}};
  if (auto v = f.get_float(a + ".rope.scaling.attn_factor")) r["attention_factor"] = *v;
  j["rope_scaling"] = r;
}

std::string dtype_of(const GgufShards& m) {
  const GgufTensorInfo* t = m.find_tensor("token_embd.weight").info;
  if (t && t->type == static_cast<uint32_t>(GgmlType::kF16)) return "float16";
  if (t && t->type == static_cast<uint32_t>(GgmlType::kBF16)) return "bfloat16";
  // F32 and quantized files: quantized weights are dequantized exactly into F32 (the CPU keeps that;
  // CUDA runs BF16 under --dtype auto whatever this says).
  return "float32";
}

}  // namespace

int64_t gguf_required_int(const GgufFile& f, const std::string& key) {
  const GgufValue* v = f.find(key);
  if (!v) throw Error(f.path() + ": metadata '" + key + "' is missing");
  if (v->type == GgufType::kArray)
    throw Error(f.path() + ": metadata '" + key + "' is a per-layer array, which is not supported");
  return *f.get_int(key);
}

std::string gguf_hf_architecture(const GgufFile& f) {
  const auto arch = f.get_string("general.architecture");
  if (!arch) throw Error(f.path() + ": metadata 'general.architecture' is missing");
  std::string names;
  for (const auto& [gguf, hf] : kArchitectures) {
    if (*arch == gguf) return hf;
    names += (names.empty() ? "" : ", ") + std::string(gguf);
  }
  throw Error(f.path() + ": general.architecture '" + *arch + "' is not supported (supported: " + names + ")");
}

ModelConfig gguf_model_config(const GgufShards& m) {
  const GgufFile& f = m.first();
  json j;
  j["architectures"] = {gguf_hf_architecture(f)};
  const std::string a = *f.get_string("general.architecture");
  j["model_type"] = a;
  j["hidden_size"] = gguf_required_int(f, a + ".embedding_length");
  // Qwen3.5 files may carry the MTP layers after the trunk (nextn_predict_layers); they are not run.
  j["num_hidden_layers"] = gguf_required_int(f, a + ".block_count") - f.get_int(a + ".nextn_predict_layers").value_or(0);
  const bool hybrid = a == "qwen3next" || a == "qwen35" || a == "qwen35moe";
  const bool deepseek2 = a == "deepseek2";  // its own rules for every MLA / MoE field (gguf_config_deepseek2.cc)
  if (deepseek2) {
    // every MoE / MLP width field comes from deepseek2_fields below
  } else if (f.get_int(a + ".expert_count").value_or(0) > 0 && (a == "llama" || a == "granitemoe")) {
    // Mixtral: llama.cpp's converter writes it as "llama" with experts feed_forward_length wide (ffn_*_exps),
    // every layer sparse, the top-k weights renormalised. GraniteMoe's (GraniteMoeModel) the same, as
    // "granitemoe" (input_linear split into ffn_gate_exps / ffn_up_exps).
    if (a == "llama") j["architectures"] = {"MixtralForCausalLM"};
    j["num_experts"] = gguf_required_int(f, a + ".expert_count");
    j["num_experts_per_tok"] = gguf_required_int(f, a + ".expert_used_count");
    j["intermediate_size"] = gguf_required_int(f, a + ".feed_forward_length");
  } else if (f.get_int(a + ".expert_count").value_or(0) > 0) {
    if (a != "qwen3moe" && a != "qwen2moe" && a != "gpt-oss" && a != "qwen3next" && a != "qwen35moe" && a != "lfm2moe" &&
        a != "glm4moe" && a != "qwen3vlmoe" && a != "hunyuan-moe" && a != "ernie4_5-moe" && a != "olmoe")
      throw Error(f.path() + ": mixture-of-experts models (" + a + ".expert_count) are supported for qwen3moe, "
                  "qwen2moe, qwen3next, qwen35moe, qwen3vlmoe, gpt-oss, lfm2moe, glm4moe, granitemoe, hunyuan-moe, "
                  "ernie4_5-moe, olmoe, deepseek2 and llama (Mixtral) only");
    // llama.cpp's qwen3moe graph: every layer sparse, softmax router, top-k weights renormalised
    // (expert_weights_norm, where a newer converter writes it); qwen2moe's: not renormalised, plus the
    // shared expert (ffn_*_shexp, expert_shared_feed_forward_length wide, gated by ffn_gate_inp_shexp).
    j["num_experts"] = gguf_required_int(f, a + ".expert_count");
    j["num_experts_per_tok"] = gguf_required_int(f, a + ".expert_used_count");
    j["moe_intermediate_size"] = a == "olmoe" && !f.find(a + ".expert_feed_forward_length")
                                     ? gguf_required_int(f, a + ".feed_forward_length")
                                     : gguf_required_int(f, a + ".expert_feed_forward_length");
    // (qwen3next / qwen35moe / lfm2moe: llama.cpp renormalises whatever the file says)
    j["norm_topk_prob"] = hybrid || a == "lfm2moe" || a == "hunyuan-moe" || f.get_bool(a + ".expert_weights_norm").value_or(a == "qwen3moe" || a == "qwen3vlmoe");
    // hunyuan-moe: ffn_*_shexp, feed_forward_length * expert_shared_count wide (model_config_hunyuan.cc).
    if (a == "hunyuan-moe") j["num_shared_expert"] = f.get_int(a + ".expert_shared_count").value_or(1);
    if ((a == "qwen2moe" || hybrid) && f.find(a + ".expert_shared_feed_forward_length"))
      j["shared_expert_intermediate_size"] = gguf_required_int(f, a + ".expert_shared_feed_forward_length");
    // Layers without a router are dense (HF's mlp_only_layers; the released files have none).
    json dense = json::array();
    for (int64_t l = 0; l < j["num_hidden_layers"].get<int64_t>(); ++l)
      if (!m.find_tensor("blk." + std::to_string(l) + ".ffn_gate_inp.weight").info) dense.push_back(l);
    if (!dense.empty()) j["mlp_only_layers"] = dense;
    j["intermediate_size"] = f.find(a + ".feed_forward_length") ? gguf_required_int(f, a + ".feed_forward_length")
                                                                 : j["moe_intermediate_size"].get<int64_t>();
    // GPT-OSS: GptOssConfig's intermediate_size is the experts' width (every layer sparse, top-k renormalised).
    if (a == "gpt-oss") j["intermediate_size"] = j["moe_intermediate_size"];
  } else {
    j["intermediate_size"] = gguf_required_int(f, a + ".feed_forward_length");
  }
  j["max_position_embeddings"] = gguf_required_int(f, a + ".context_length");
  // llama.cpp's key for a window on every layer (where a converter writes it), as Mistral's config.json has it.
  if (auto sw = f.get_int(a + ".attention.sliding_window"); sw && *sw > 0) j["sliding_window"] = *sw;
  const int64_t heads = gguf_required_int(f, a + ".attention.head_count");
  j["num_attention_heads"] = heads;
  if (!deepseek2) {
    if (a != "lfm2" && a != "lfm2moe")  // lfm2: per layer (lfm2_fields)
      j["num_key_value_heads"] = f.find(a + ".attention.head_count_kv") ? gguf_required_int(f, a + ".attention.head_count_kv") : heads;
    const int64_t head_dim =
        f.get_int(a + ".attention.key_length").value_or(heads > 0 ? j["hidden_size"].get<int64_t>() / heads : 0);
    j["head_dim"] = head_dim;
    if (auto vl = f.get_int(a + ".attention.value_length"); vl && *vl != head_dim)
      throw Error(f.path() + ": metadata '" + a + ".attention.value_length' differs from key_length (not supported)");
    // Written even when whole: families whose config class defaults to partial RoPE (GLM-4.5) read it.
    if (auto rd = f.get_int(a + ".rope.dimension_count"); rd && head_dim > 0)
      j["partial_rotary_factor"] = static_cast<double>(*rd) / static_cast<double>(head_dim);
  }
  if (auto eps = f.get_float(a + ".attention.layer_norm_rms_epsilon")) j["rms_norm_eps"] = *eps;
  j["rope_theta"] = f.get_float(a + ".rope.freq_base").value_or(10000.0);
  if (json rs = rope_scaling(f, a); !rs.is_null()) {
    // GPT-OSS's YaRN keeps the correction range unrounded (truncate: false in its config).
    if (a == "gpt-oss" && rs["rope_type"] == "yarn") rs["truncate"] = false;
    j["rope_scaling"] = rs;
  }

  // Vocabulary: <arch>.vocab_size, else the token list, else the embedding's rows.
  int64_t vocab = 0;
  if (auto v = f.get_int(a + ".vocab_size")) {
    vocab = *v;
  } else if (const json* toks = f.get_array("tokenizer.ggml.tokens", GgufType::kString)) {
    vocab = static_cast<int64_t>(toks->size());
  } else if (const GgufTensorInfo* e = m.find_tensor("token_embd.weight").info; e && e->ne.size() == 2) {
    vocab = e->ne[1];
  }
  if (vocab <= 0) throw Error(f.path() + ": no vocabulary size (" + a + ".vocab_size, tokenizer.ggml.tokens)");
  j["vocab_size"] = vocab;
  // The converter drops output.weight when the checkpoint ties it to the embedding.
  j["tie_word_embeddings"] = m.find_tensor("output.weight").info == nullptr;
  j["attention_bias"] = m.find_tensor("blk.0.attn_output.bias").info != nullptr;
  j["mlp_bias"] = m.find_tensor("blk.0.ffn_down.bias").info != nullptr;
  j["torch_dtype"] = dtype_of(m);
  json eos = json::array();
  for (const char* k : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"})
    if (auto id = f.get_int(k); id && std::find(eos.begin(), eos.end(), json(*id)) == eos.end()) eos.push_back(*id);
  if (!eos.empty()) j["eos_token_id"] = eos;
  if (auto bos = f.get_int("tokenizer.ggml.bos_token_id")) j["bos_token_id"] = *bos;
  if (a == "gemma3" || a == "gemma2") gemma_fields(f, a, j);
  if (a == "gemma") j["hidden_activation"] = "gelu_pytorch_tanh";
  if (a == "lfm2" || a == "lfm2moe") lfm2_fields(m, a, j);
  if (a == "glm4moe") glm4moe_fields(m, a, j);
  if (a == "olmo2") olmo2_fields(f, a, j);
  // EXAONE 4.0: the flags where written; else Exaone4Config's sliding_window_pattern default (model_config_exaone4.cc).
  if (a == "exaone4") sliding_layer_types(f, a, j);
  if (a == "ernie4_5" || a == "ernie4_5-moe") ernie_fields(f, m, a, j);
  if (a == "glm4") j["attention_bias"] = m.find_tensor("blk.0.attn_q.bias").info != nullptr;  // none on o_proj
  if (a == "seed_oss") {  // q/k/v biases without o_proj's (attention_out_bias), told by the tensors present
    j["attention_bias"] = m.find_tensor("blk.0.attn_q.bias").info != nullptr;
    j["attention_out_bias"] = m.find_tensor("blk.0.attn_output.bias").info != nullptr;
  }
  if (deepseek2) deepseek2_fields(m, a, j);
  if (hybrid) qwen3_next_fields(m, a, j);
  if (a == "granite" || a == "granitemoe") {  // convert_hf_to_gguf.py's GraniteModel: the multipliers as <arch>.*_scale
    for (auto [key, field] : {std::pair{".attention.scale", "attention_multiplier"},
                              std::pair{".embedding_scale", "embedding_multiplier"},
                              std::pair{".residual_scale", "residual_multiplier"}, std::pair{".logit_scale", "logits_scaling"}})
      if (auto v = f.get_float(a + key)) j[field] = *v;
  }
  if (a == "phi3") {
    const int64_t hd = j["head_dim"].get<int64_t>();
    phi3_fields(m, a, static_cast<int>(f.get_int(a + ".rope.dimension_count").value_or(hd)), j);
  }

  ModelConfig c = ModelConfig::from_json(j, f.path());
  c.rope_scaling.freq_factors = rope_freq_factors(m, c.rotary_dim() / 2);
  if (deepseek2) deepseek2_finish(m, a, c);
  return c;
}

}  // namespace vireo
