// Test-only conversions in the manner of llama.cpp's convert_hf_to_gguf.py: a safetensors
// fixture directory -> a GGUF model file, and a tokenizer.json directory -> tokenizer.ggml.* metadata.
#pragma once
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf_writer.h"
#include "hf_to_gguf_qwen3_next.h"
#include "model/safetensors.h"

namespace vireo::testing {

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f);
}

// The converter's tensor names (llama.cpp's gguf-py tensor_mapping), written out independently
// of the product's mapping so a mistake there shows up here.
inline std::string converter_tensor_name(const std::string& hf, const std::string& arch) {
  if (hf == "model.embed_tokens.weight") return "token_embd.weight";
  if (hf == "model.norm.weight") return "output_norm.weight";
  if (hf == "lm_head.weight") return "output.weight";
  static const std::map<std::string, std::string> layer = {
      {"input_layernorm", "attn_norm"}, {"self_attn.q_proj", "attn_q"}, {"self_attn.k_proj", "attn_k"},
      {"self_attn.v_proj", "attn_v"}, {"self_attn.o_proj", "attn_output"}, {"self_attn.q_norm", "attn_q_norm"},
      {"self_attn.k_norm", "attn_k_norm"}, {"post_attention_layernorm", "ffn_norm"},
      {"post_feedforward_layernorm", "post_ffw_norm"}, {"mlp.gate_proj", "ffn_gate"}, {"mlp.up_proj", "ffn_up"},
      {"mlp.down_proj", "ffn_down"}, {"mlp.gate", "ffn_gate_inp"}, {"block_sparse_moe.gate", "ffn_gate_inp"},
      {"mlp.shared_expert.gate_proj", "ffn_gate_shexp"}, {"mlp.shared_expert.up_proj", "ffn_up_shexp"},
      {"mlp.shared_expert.down_proj", "ffn_down_shexp"}, {"mlp.shared_expert_gate", "ffn_gate_inp_shexp"},
      {"pre_feedforward_layernorm", "ffn_norm"}, {"self_attn.qkv_proj", "attn_qkv"}, {"mlp.gate_up_proj", "ffn_up"},
      {"post_self_attn_layernorm", "post_attention_norm"}, {"post_mlp_layernorm", "post_ffw_norm"},  // glm4
      {"mlp.router", "ffn_gate_inp"}, {"block_sparse_moe.router.layer", "ffn_gate_inp"},
      {"self_attn.query_layernorm", "attn_q_norm"}, {"self_attn.key_layernorm", "attn_k_norm"},  // hunyuan
      {"mlp.gate.wg", "ffn_gate_inp"}, {"mlp.shared_mlp.gate_proj", "ffn_gate_shexp"},            // hunyuan-moe
      {"mlp.shared_mlp.up_proj", "ffn_up_shexp"}, {"mlp.shared_mlp.down_proj", "ffn_down_shexp"},
      {"operator_norm", "attn_norm"}, {"ffn_norm", "ffn_norm"}, {"self_attn.q_layernorm", "attn_q_norm"},  // lfm2
      {"self_attn.k_layernorm", "attn_k_norm"}, {"self_attn.out_proj", "attn_output"},
      {"feed_forward.w1", "ffn_gate"}, {"feed_forward.w3", "ffn_up"}, {"feed_forward.w2", "ffn_down"},
      {"feed_forward.gate", "ffn_gate_inp"},  // lfm2moe
      {"conv.in_proj", "shortconv.in_proj"}, {"conv.conv", "shortconv.conv"}, {"conv.out_proj", "shortconv.out_proj"},
      {"self_attn.q_a_proj", "attn_q_a"}, {"self_attn.q_a_layernorm", "attn_q_a_norm"},  // deepseek2
      {"self_attn.q_b_proj", "attn_q_b"}, {"self_attn.kv_a_proj_with_mqa", "attn_kv_a_mqa"},
      {"self_attn.kv_a_layernorm", "attn_kv_a_norm"}, {"self_attn.kv_b_proj", "attn_kv_b"},
      {"mlp.shared_experts.gate_proj", "ffn_gate_shexp"}, {"mlp.shared_experts.up_proj", "ffn_up_shexp"},
      {"mlp.shared_experts.down_proj", "ffn_down_shexp"}};
  if (hf == "model.embedding_norm.weight") return "token_embd_norm.weight";  // LFM2's final norm
  if (hf.size() > 15 && hf.compare(hf.size() - 15, 15, "self_attn.sinks") == 0)  // GPT-OSS: ".weight" appended
    return "blk." + hf.substr(13, hf.find('.', 13) - 13) + ".attn_sinks.weight";
  const size_t a = std::string("model.layers.").size(), dot = hf.find('.', a), last = hf.rfind('.');
  std::string module = hf.substr(dot + 1, last - dot - 1);
  std::string name = layer.at(module);
  if ((arch == "olmo2" || arch == "gemma3" || arch == "gemma2" || arch == "gpt-oss" || arch == "qwen3next" ||
       arch == "qwen35" || arch == "qwen35moe" || arch == "exaone4") &&
      module == "post_attention_layernorm")
    name = "post_attention_norm";
  return "blk." + hf.substr(a, dot - a) + "." + name + hf.substr(last);
}

// convert_hf_to_gguf.py's LlamaModel.permute: per head, rows [s * D/2 + i] -> [2i + s].
inline std::vector<float> permute_rows(const std::vector<float>& w, int64_t heads, int64_t row) {
  std::vector<float> out(w.size());
  const int64_t D = static_cast<int64_t>(w.size()) / row / heads, half = D / 2;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t s = 0; s < 2; ++s)
      for (int64_t i = 0; i < half; ++i)
        std::copy_n(&w[(h * D + s * half + i) * row], row, &out[(h * D + 2 * i + s) * row]);
  return out;
}

// A Q8_0 tensor whose rows are not whole 32-value blocks is written F32 instead (llama.cpp's converter falls
// back to a float type for such tensors too).
inline uint32_t whole_blocks_or_f32(uint32_t type, int64_t row) {
  return (type == kGgmlQ8_0 || type == kGgmlIQ4_NL) && row % 32 ? kGgmlF32 : type;
}

struct ConvertOptions {
  uint32_t type = kGgmlF32;  // of 2-D weights; norms and biases stay F32 as the converter keeps them
  uint32_t expert_type = ~0u;  // GPT-OSS's stacked experts (MXFP4 in the released files); ~0: `type`
  bool fuse_gate_up_exps = false;  // GPT-OSS: one ffn_gate_up_exps ([gate; up] rows per expert), as the converter's option
  uint32_t version = 3;
  uint64_t alignment = 32;
  std::function<void(GgufWriter&)> extra_metadata;  // called after the converter's own metadata
  bool deepseek_legacy_kv_b = false;  // DeepSeek: one attn_kv_b, as converters before April 2025 wrote it
  bool qwen3_next_legacy = false;     // Qwen3-Next: in_proj_qkvz kept whole as ssm_in (older converters)
  std::string arch;                   // general.architecture (and key prefix) other than the HF class's

};

// convert_hf_to_gguf.py's DeepseekV2Model metadata (the newer converter: MLA keys, group keys): the
// attention keys describe llama.cpp's absorbed MLA (head_count_kv 1, key_length kv_lora + rope) with the
// per-head sizes in *_mla; legacy files (before April 2025) the per-head sizes themselves.
inline void add_deepseek2_metadata(GgufWriter& w, const nlohmann::json& c, bool legacy) {
  const std::string a = "deepseek2";
  const int64_t r = c["kv_lora_rank"], dr = c["qk_rope_head_dim"], dn = c["qk_nope_head_dim"], dv = c["v_head_dim"];
  w.add_u32(a + ".attention.head_count_kv", legacy ? c["num_key_value_heads"].get<uint32_t>() : 1u);
  w.add_u32(a + ".attention.key_length", static_cast<uint32_t>(legacy ? dn + dr : r + dr));
  w.add_u32(a + ".attention.value_length", static_cast<uint32_t>(legacy ? dv : r));
  if (!legacy) {
    w.add_u32(a + ".attention.key_length_mla", static_cast<uint32_t>(dn + dr));
    w.add_u32(a + ".attention.value_length_mla", static_cast<uint32_t>(dv));
  }
  w.add_u32(a + ".rope.dimension_count", static_cast<uint32_t>(dr));
  w.add_u32(a + ".leading_dense_block_count", c["first_k_dense_replace"]);
  w.add_u32(a + ".vocab_size", c["vocab_size"]);
  if (c.contains("q_lora_rank") && !c["q_lora_rank"].is_null()) w.add_u32(a + ".attention.q_lora_rank", c["q_lora_rank"]);
  w.add_u32(a + ".attention.kv_lora_rank", static_cast<uint32_t>(r));
  w.add_u32(a + ".expert_feed_forward_length", c["moe_intermediate_size"]);
  w.add_u32(a + ".expert_count", c["n_routed_experts"]);
  w.add_u32(a + ".expert_used_count", c["num_experts_per_tok"]);
  w.add_u32(a + ".expert_shared_count", c["n_shared_experts"]);
  w.add_f32(a + ".expert_weights_scale", c["routed_scaling_factor"].get<float>());
  w.add_bool(a + ".expert_weights_norm", c.value("norm_topk_prob", false));
  const bool v3 = c["architectures"][0] == "DeepseekV3ForCausalLM";
  const std::string scoring = c.value("scoring_func", v3 ? "sigmoid" : "softmax");  // the configs' defaults
  w.add_u32(a + ".expert_gating_func", scoring == "sigmoid" ? 2u : 1u);
  if (c.contains("n_group") && !c["n_group"].is_null()) {
    w.add_u32(a + ".expert_group_count", c["n_group"]);
    w.add_u32(a + ".expert_group_used_count", c["topk_group"]);
  }
}

// GPT-OSS's stacked experts as convert_hf_to_gguf.py's GptOssModel writes them (unfused): gate_up_proj
// [E, hidden, 2I] (gate / up in alternate columns) -> ffn_gate_exps / ffn_up_exps [E, I, hidden];
// down_proj [E, I, hidden] -> ffn_down_exps [E, hidden, I]; the biases split the same way, kept F32.
// fuse: gate and up as one ffn_gate_up_exps [E, 2I, hidden] (expert e's gate rows, then its up rows) and
// bias [E, 2I].
inline void add_gpt_oss_experts(GgufWriter& w, const std::string& name, const std::vector<int64_t>& shape,
                                const std::vector<float>& v, uint32_t type, bool fuse = false) {
  const size_t x = name.find(".mlp.experts.");
  const std::string blk = "blk." + name.substr(13, x - 13) + ".", what = name.substr(x + 13);
  const int64_t E = shape[0];
  auto add = [&](const std::string& n, std::vector<int64_t> ne, const std::vector<float>& d, uint32_t t) {
    w.add_tensor(blk + n, ne, t, encode_values(d.data(), static_cast<int64_t>(d.size()), t));
  };
  if (what == "gate_up_proj" || what == "gate_up_proj_bias") {
    const bool bias = what == "gate_up_proj_bias";
    const int64_t H = bias ? 1 : shape[1], I = shape.back() / 2;
    std::vector<float> part[2];
    for (int s = 0; s < 2; ++s)
      for (int64_t e = 0; e < E; ++e)
        for (int64_t i = 0; i < I; ++i)
          for (int64_t h = 0; h < H; ++h) part[s].push_back(v[(e * H + h) * 2 * I + 2 * i + s]);
    if (fuse) {
      std::vector<float> both;
      for (int64_t e = 0; e < E; ++e)
        for (int s = 0; s < 2; ++s) both.insert(both.end(), part[s].begin() + e * I * H, part[s].begin() + (e + 1) * I * H);
      add(std::string("ffn_gate_up_exps") + (bias ? ".bias" : ".weight"),
          bias ? std::vector<int64_t>{2 * I, E} : std::vector<int64_t>{H, 2 * I, E}, both, bias ? kGgmlF32 : type);
      return;
    }
    for (int s = 0; s < 2; ++s)
      add(std::string(s ? "ffn_up_exps" : "ffn_gate_exps") + (bias ? ".bias" : ".weight"),
          bias ? std::vector<int64_t>{I, E} : std::vector<int64_t>{H, I, E}, part[s], bias ? kGgmlF32 : type);
    return;
  }
  if (what == "down_proj_bias") return add("ffn_down_exps.bias", {shape[1], E}, v, kGgmlF32);
  const int64_t I = shape[1], H = shape[2];  // down_proj [E, I, hidden] -> [E, hidden, I]
  std::vector<float> d;
  for (int64_t e = 0; e < E; ++e)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < I; ++i) d.push_back(v[(e * I + i) * H + h]);
  add("ffn_down_exps.weight", {I, H, E}, d, type);
}

// Writes the fixture in `dir` (config.json + *.safetensors) as the GGUF file `out`.
inline void convert_model_fixture(const std::string& dir, const std::string& out, const ConvertOptions& o = {}) {
  namespace fs = std::filesystem;
  const nlohmann::json c = read_json(dir + "/config.json");
  static const std::map<std::string, std::string> archs = {{"LlamaForCausalLM", "llama"}, {"Qwen2ForCausalLM", "qwen2"},
                                                           {"Qwen3ForCausalLM", "qwen3"}, {"Olmo2ForCausalLM", "olmo2"},
                                                           {"Olmo3ForCausalLM", "olmo2"},  // Olmo2Model converts both
                                                           {"Qwen3MoeForCausalLM", "qwen3moe"},
                                                           {"MixtralForCausalLM", "llama"},  // as the converter does
                                                           {"Qwen2MoeForCausalLM", "qwen2moe"},
                                                           {"Gemma3ForCausalLM", "gemma3"},
                                                           {"Gemma2ForCausalLM", "gemma2"},
                                                           {"GemmaForCausalLM", "gemma"},
                                                           {"Phi3ForCausalLM", "phi3"},
                                                           {"GptOssForCausalLM", "gpt-oss"},
                                                           {"GraniteForCausalLM", "granite"},
                                                           {"GraniteMoeForCausalLM", "granitemoe"},
                                                           {"HunYuanDenseV1ForCausalLM", "hunyuan-dense"},
                                                           {"HunYuanMoEV1ForCausalLM", "hunyuan-moe"},
                                                           {"Lfm2ForCausalLM", "lfm2"},
                                                           {"Lfm2MoeForCausalLM", "lfm2moe"},
                                                           {"Glm4MoeForCausalLM", "glm4moe"},
                                                           {"SeedOssForCausalLM", "seed_oss"},
                                                           {"DeepseekV2ForCausalLM", "deepseek2"},
                                                           {"DeepseekV3ForCausalLM", "deepseek2"},
                                                           {"Qwen3NextForCausalLM", "qwen3next"},
                                                           {"Qwen3_5ForCausalLM", "qwen35"},
                                                           {"SmolLM3ForCausalLM", "smollm3"},
                                                           {"Qwen3_5MoeForCausalLM", "qwen35moe"},
                                                           {"Ernie4_5ForCausalLM", "ernie4_5"},
                                                           {"Ernie4_5_MoeForCausalLM", "ernie4_5-moe"},
                                                           {"OlmoeForCausalLM", "olmoe"},
                                                           {"Exaone4ForCausalLM", "exaone4"},
                                                           {"Glm4ForCausalLM", "glm4"}};
  const std::string a = o.arch.empty() ? archs.at(c["architectures"][0].get<std::string>()) : o.arch;
  const int64_t hidden = c["hidden_size"], heads = c["num_attention_heads"], kv_heads = c["num_key_value_heads"];
  const int64_t head_dim = c.value("head_dim", hidden / heads);
  nlohmann::json rope = c.contains("rope_parameters") ? c["rope_parameters"] : nlohmann::json::object();
  if (rope.contains("full_attention")) rope = rope["full_attention"];  // Gemma 3: the global layers' RoPE
  const double theta = rope.value("rope_theta", c.value("rope_theta", 10000.0));
  GgufWriter w;
  w.add_string("general.architecture", a);
  w.add_string("general.name", fs::path(dir).filename().string());
  if (o.alignment != 32) w.add_u32("general.alignment", static_cast<uint32_t>(o.alignment));
  const std::string rope_type = rope.value("rope_type", "default");
  // HunYuanModel: dynamic NTK-alpha baked into the base (Python doubles), no scaling, a 256k context.
  const bool alpha_rope = (a == "hunyuan-dense" || a == "hunyuan-moe") && rope_type == "dynamic";
  w.add_u32(a + ".context_length", alpha_rope ? 262144u : c["max_position_embeddings"].get<uint32_t>());
  w.add_u32(a + ".embedding_length", static_cast<uint32_t>(hidden));
  w.add_u32(a + ".block_count", c["num_hidden_layers"]);
  const bool lfm2 = a == "lfm2" || a == "lfm2moe";
  if (a == "lfm2") {  // LFM2Model._add_feed_forward_length: block_ff_dim's rule, always rounded up
    int64_t ff = c.value("block_ff_dim", c["intermediate_size"].get<int64_t>());
    if (c.value("block_auto_adjust_ff_dim", false)) {
      ff = static_cast<int64_t>(2.0 * ff / 3);
      if (c.contains("block_ffn_dim_multiplier") && !c["block_ffn_dim_multiplier"].is_null())
        ff = static_cast<int64_t>(c["block_ffn_dim_multiplier"].get<double>() * ff);
      const int64_t m = c["block_multiple_of"];
      ff = m * ((ff + m - 1) / m);
    }
    w.add_u32(a + ".feed_forward_length", static_cast<uint32_t>(ff));
  } else {
    w.add_u32(a + ".feed_forward_length", c["intermediate_size"]);
  }
  w.add_u32(a + ".attention.head_count", static_cast<uint32_t>(heads));
  if (lfm2) {  // LFM2Model / LFM2MoeModel: head_count_kv per layer, 0 on conv layers
    std::vector<int32_t> kv;
    for (const auto& t : c["layer_types"]) kv.push_back(t == "full_attention" ? static_cast<int32_t>(kv_heads) : 0);
    w.add_i32_array(a + ".attention.head_count_kv", kv);
    w.add_u32(a + ".shortconv.l_cache", c["conv_L_cache"]);
    w.add_u32(a + ".vocab_size", c["vocab_size"]);
  } else if (a == "deepseek2") {
    add_deepseek2_metadata(w, c, o.deepseek_legacy_kv_b);
  } else {
    w.add_u32(a + ".attention.head_count_kv", static_cast<uint32_t>(kv_heads));
  }
  if (a != "deepseek2") {
    w.add_u32(a + ".attention.key_length", static_cast<uint32_t>(head_dim));
    w.add_u32(a + ".attention.value_length", static_cast<uint32_t>(head_dim));
  }
  // Phi-3's converter writes the rotary width (partial_rotary_factor); the others the head width.
  const int64_t rope_dims = a == "phi3" || a == "glm4moe" || a == "glm4" ? static_cast<int64_t>(rope.value("partial_rotary_factor", c.value("partial_rotary_factor", 1.0)) *
                                                                head_dim)
                                        : head_dim;
  const bool hybrid = a == "qwen3next" || a == "qwen35" || a == "qwen35moe";
  if (hybrid) add_qwen3_next_metadata(w, a, c);
  if (a != "deepseek2" && !hybrid) w.add_u32(a + ".rope.dimension_count", static_cast<uint32_t>(rope_dims));
  if (alpha_rope) {
    const double alpha = rope.value("alpha", 50.0);
    w.add_f32(a + ".rope.freq_base", static_cast<float>(theta * std::pow(alpha, double(head_dim) / double(head_dim - 2))));
    w.add_string(a + ".rope.scaling.type", "none");
    w.add_f32(a + ".rope.scaling.factor", 1.0f);
    w.add_u32(a + ".rope.scaling.original_context_length", 262144u);
  } else {
    w.add_f32(a + ".rope.freq_base", static_cast<float>(theta));
  }
  w.add_f32(a + ".attention.layer_norm_rms_epsilon", c.value("rms_norm_eps", c.value("norm_eps", 1e-6f)));
  if (c.contains("sliding_window") && c["sliding_window"].is_number_integer())
    w.add_u32(a + ".attention.sliding_window", c["sliding_window"]);
  if ((a == "olmo2" || a == "exaone4") && c.contains("layer_types")) {  // Olmo2Model (OLMo 3), Exaone4Model
    std::vector<bool> pattern;
    for (const auto& t : c["layer_types"]) pattern.push_back(t == "sliding_attention");
    w.add_bool_array(a + ".attention.sliding_window_pattern", pattern);
  }
  // (deepseek2: add_deepseek2_metadata wrote them)
  // (hunyuan-moe's hub config gives num_experts per layer; the converter asserts they agree)
  const int64_t num_experts = a == "deepseek2"                                          ? 0
                              : a == "ernie4_5-moe"                                      ? c["moe_num_experts"].get<int64_t>()
                              : c.contains("num_experts") && c["num_experts"].is_array() ? c["num_experts"][0].get<int64_t>()
                              : c.value("num_experts", c.value("num_local_experts", c.value("n_routed_experts", int64_t{0})));
  if (num_experts > 0) {  // the converter's Qwen3MoeModel: expert counts and the expert FFN width
    w.add_u32(a + ".expert_count", static_cast<uint32_t>(num_experts));
    if (a == "ernie4_5-moe") {  // Ernie4_5MoeModel
      w.add_u32(a + ".expert_used_count", c["moe_k"]);
      w.add_u32(a + ".interleave_moe_layer_step", c.value("moe_layer_interval", 1));
      w.add_u32(a + ".leading_dense_block_count", c.value("moe_layer_start_index", 1));
      w.add_u32(a + ".expert_shared_count", c.value("moe_num_shared_experts", 2));
    } else if (a != "hunyuan-moe") {
      w.add_u32(a + ".expert_used_count", c["num_experts_per_tok"]);
    }
    // (Mixtral, as "llama": the experts are feed_forward_length wide; no expert_feed_forward_length)
    if (c.contains("moe_intermediate_size") && a != "hunyuan-moe") w.add_u32(a + ".expert_feed_forward_length", c["moe_intermediate_size"]);
    if (a == "gpt-oss") w.add_u32(a + ".expert_feed_forward_length", c["intermediate_size"]);  // GptOssModel
    if (c.contains("shared_expert_intermediate_size"))
      w.add_u32(a + ".expert_shared_feed_forward_length", c["shared_expert_intermediate_size"]);
    if (a == "glm4moe") {  // Glm4MoeModel
      w.add_u32(a + ".leading_dense_block_count", c["first_k_dense_replace"]);
      w.add_u32(a + ".expert_shared_count", c.value("n_shared_experts", 1));
      w.add_f32(a + ".expert_weights_scale", c.value("routed_scaling_factor", 1.0f));
      w.add_bool(a + ".expert_weights_norm", c.value("norm_topk_prob", true));
      w.add_u32(a + ".expert_gating_func", 2u);  // sigmoid
      w.add_u32(a + ".expert_group_count", c.value("n_group", 1));
      w.add_u32(a + ".expert_group_used_count", c.value("topk_group", 1));
    }
    if (a == "hunyuan-moe") {  // HunYuanMoEModel (per-layer lists must agree: their first entry)
      auto first = [&](const char* key, int64_t def) {
        if (!c.contains(key) || c[key].is_null()) return def;
        return c[key].is_array() ? c[key][0].get<int64_t>() : c[key].get<int64_t>();
      };
      w.add_u32(a + ".expert_shared_feed_forward_length", c["intermediate_size"]);
      w.add_u32(a + ".expert_feed_forward_length", static_cast<uint32_t>(first("moe_intermediate_size", c["intermediate_size"])));
      w.add_u32(a + ".expert_used_count", static_cast<uint32_t>(first("moe_topk", 1)));
      w.add_u32(a + ".expert_shared_count", static_cast<uint32_t>(first("num_shared_expert", 1)));
    }
    if (a == "lfm2moe") {  // LFM2MoeModel
      w.add_u32(a + ".leading_dense_block_count", c["num_dense_layers"]);
      w.add_u32(a + ".expert_gating_func", 2u);  // sigmoid
      // (not the converter's: the fixture's routed_scaling_factor 1.5; the released models have 1.0)
      if (c.value("routed_scaling_factor", 1.0) != 1.0) w.add_f32(a + ".expert_weights_scale", c["routed_scaling_factor"].get<float>());
    }
  }
  if (rope_type == "linear") {
    w.add_string(a + ".rope.scaling.type", "linear");
    w.add_f32(a + ".rope.scaling.factor", rope["factor"].get<float>());
  }
  if (a == "granite" || a == "granitemoe") {  // GraniteModel: the multipliers as *_scale keys
    for (auto [field, key] : {std::pair{"attention_multiplier", ".attention.scale"},
                              std::pair{"embedding_multiplier", ".embedding_scale"},
                              std::pair{"residual_multiplier", ".residual_scale"}, std::pair{"logits_scaling", ".logit_scale"}})
      if (c.contains(field)) w.add_f32(a + key, c[field].get<float>());
  }
  if (a == "gemma2") {  // what convert_hf_to_gguf.py's Gemma2Model writes
    for (const char* key : {"attn_logit_softcapping", "final_logit_softcapping"})
      if (c.contains(key) && !c[key].is_null()) w.add_f32(a + "." + key, c[key].get<float>());
  }
  if (a == "gemma3" || a == "gemma2") {
    // llama.cpp has no key for a layer order other than its period of 6 (2), nor for query_pre_attn_scalar:
    // the fixture's are written as <arch>.attention.sliding_window_pattern (one flag per layer) and
    // <arch>.attention.scale, which vireo reads where present.
    std::vector<int32_t> flags;
    for (const auto& t : c["layer_types"]) flags.push_back(t == "sliding_attention");
    w.add_i32_array(a + ".attention.sliding_window_pattern", flags);
    w.add_f32(a + ".attention.scale", static_cast<float>(1.0 / std::sqrt(c["query_pre_attn_scalar"].get<double>())));
  }
  if (a == "phi3") {  // Phi3MiniModel: the pretrained length, and LongRoPE as two factor tensors + attn_factor
    const int64_t orig = rope.value("original_max_position_embeddings",
                                    c.value("original_max_position_embeddings", c["max_position_embeddings"].get<int64_t>()));
    w.add_u32(a + ".rope.scaling.original_context_length", static_cast<uint32_t>(orig));
    if (rope_type == "longrope") {
      const double scale = c["max_position_embeddings"].get<double>() / static_cast<double>(orig);
      w.add_f32(a + ".rope.scaling.attn_factor",
                static_cast<float>(scale > 1 ? std::sqrt(1 + std::log(scale) / std::log(static_cast<double>(orig))) : 1.0));
      for (const char* k : {"long_factor", "short_factor"}) {
        const std::vector<float> f = rope[k].get<std::vector<float>>();
        w.add_tensor(std::string("rope_factors_") + (k[0] == 'l' ? "long" : "short") + ".weight",
                     {static_cast<int64_t>(f.size())}, kGgmlF32, encode_values(f.data(), static_cast<int64_t>(f.size()), kGgmlF32));
      }
    }
  }
  if (rope_type == "yarn") {
    w.add_string(a + ".rope.scaling.type", "yarn");
    w.add_f32(a + ".rope.scaling.factor", rope["factor"].get<float>());
    w.add_u32(a + ".rope.scaling.original_context_length", rope["original_max_position_embeddings"]);
    if (a == "deepseek2")
      w.add_f32(a + ".rope.scaling.yarn_log_multiplier", 0.1f * rope.value("mscale_all_dim", 0.0f));
  }
  if (rope_type == "llama3") {  // the converter's rope_freqs tensor: per-frequency divisors
    const double factor = rope["factor"], lo = rope["low_freq_factor"], hi = rope["high_freq_factor"];
    const double old_ctx = rope["original_max_position_embeddings"];
    std::vector<float> factors;
    for (int64_t i = 0; i < head_dim; i += 2) {
      const float freq = 1.0f / static_cast<float>(std::pow(theta, static_cast<double>(static_cast<float>(i) / head_dim)));
      const double wavelen = 2 * M_PI / freq;
      if (wavelen < old_ctx / hi) {
        factors.push_back(1.0f);
      } else if (wavelen > old_ctx / lo) {
        factors.push_back(static_cast<float>(factor));
      } else {
        const double smooth = (old_ctx / wavelen - lo) / (hi - lo);
        factors.push_back(static_cast<float>(1 / ((1 - smooth) / factor + smooth)));
      }
    }
    w.add_tensor("rope_freqs.weight", {static_cast<int64_t>(factors.size())}, kGgmlF32,
                 encode_values(factors.data(), static_cast<int64_t>(factors.size()), kGgmlF32));
  }
  const int64_t vocab = c["vocab_size"];
  std::vector<std::string> tokens;
  for (int64_t i = 0; i < vocab; ++i) tokens.push_back("t" + std::to_string(i));
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  w.add_i32_array("tokenizer.ggml.token_type", std::vector<int32_t>(vocab, 1));
  if (c.contains("eos_token_id") && c["eos_token_id"].is_number_integer())
    w.add_u32("tokenizer.ggml.eos_token_id", c["eos_token_id"]);
  if (o.extra_metadata) o.extra_metadata(w);

  const bool tied = c.value("tie_word_embeddings", false);
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".safetensors") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  // Per-expert tensors, stacked as the converter does: (layer, "gate"/"up"/"down") -> expert -> values.
  std::map<std::pair<std::string, std::string>, std::map<int64_t, std::vector<float>>> experts;
  std::map<std::pair<std::string, std::string>, std::vector<int64_t>> expert_shape;
  for (const auto& path : files) {
    SafetensorsFile f(path);
    for (const auto& [name, e] : f.entries()) {
      if (name == "lm_head.weight" && tied) continue;
      Tensor t = f.tensor(name);
      std::vector<float> v(t.numel());
      convert_to_f32(t.data, t.dtype, v.data(), v.size());
      if (a == "deepseek2" && name.rfind("model.layers.", 0) == 0 &&
          std::stoll(name.substr(13, name.find('.', 13) - 13)) >= c["num_hidden_layers"].get<int64_t>())
        continue;  // the MTP layers are dropped
      if (a == "ernie4_5-moe" && name.find(".mlp.moe_statics.e_score_correction_bias") != std::string::npos) {
        // gguf-py's exp_probs_b, kept [1, E] as the checkpoint stores it (ne {E, 1})
        w.add_tensor("blk." + name.substr(13, name.find('.', 13) - 13) + ".exp_probs_b.bias", {t.numel(), 1}, kGgmlF32,
                     encode_values(v.data(), t.numel(), kGgmlF32));
        continue;
      }
      if (((a == "deepseek2" || a == "glm4moe") && name.find(".mlp.gate.e_score_correction_bias") != std::string::npos) ||
          (a == "lfm2moe" && name.find(".feed_forward.expert_bias") != std::string::npos)) {
        w.add_tensor("blk." + name.substr(13, name.find('.', 13) - 13) + ".exp_probs_b.bias", {t.numel()}, kGgmlF32,
                     encode_values(v.data(), t.numel(), kGgmlF32));
        continue;
      }
      if (a == "deepseek2" && name.find(".self_attn.kv_b_proj.weight") != std::string::npos && !o.deepseek_legacy_kv_b) {
        // DeepseekV2Model.modify_tensors: view [N, dn + dv, r], split, k_b transposed to [N, r, dn]
        const int64_t N = heads, dn = c["qk_nope_head_dim"], dv = c["v_head_dim"], r = t.shape[1];
        std::vector<float> kb, vb;
        for (int64_t h = 0; h < N; ++h)
          for (int64_t ci = 0; ci < r; ++ci)
            for (int64_t d = 0; d < dn; ++d) kb.push_back(v[(h * (dn + dv) + d) * r + ci]);
        for (int64_t h = 0; h < N; ++h)
          for (int64_t j = 0; j < dv; ++j)
            for (int64_t ci = 0; ci < r; ++ci) vb.push_back(v[(h * (dn + dv) + dn + j) * r + ci]);
        const std::string blk = "blk." + name.substr(13, name.find('.', 13) - 13) + ".";
        w.add_tensor(blk + "attn_k_b.weight", {dn, r, N}, o.type, encode_values(kb.data(), static_cast<int64_t>(kb.size()), o.type));
        w.add_tensor(blk + "attn_v_b.weight", {r, dv, N}, o.type, encode_values(vb.data(), static_cast<int64_t>(vb.size()), o.type));
        continue;
      }
      if (const size_t x = name.find(".linear_attn."); hybrid && x != std::string::npos) {
        add_qwen3_next_gdn(w, a, c, "blk." + name.substr(13, x - 13) + ".", name.substr(x + 13), t.shape, std::move(v),
                           o.type, o.qwen3_next_legacy);
        continue;
      }
      // Qwen3NextModel: every other *norm.weight stored as 1 + w (zero-centred norms)
      if (hybrid && name.size() > 11 && name.compare(name.size() - 11, 11, "norm.weight") == 0)
        for (float& x : v) x += 1.0f;
      if (a == "gpt-oss" && name.find(".mlp.experts.") != std::string::npos) {
        add_gpt_oss_experts(w, name, t.shape, v, o.expert_type == ~0u ? o.type : o.expert_type, o.fuse_gate_up_exps);
        continue;
      }
      if (const size_t x = name.find(".block_sparse_moe.input_linear.weight"); x != std::string::npos) {
        // GraniteMoeModel: [E, 2I, hidden] split into ffn_gate_exps / ffn_up_exps [E, I, hidden]
        const int64_t E = t.shape[0], I = t.shape[1] / 2, H = t.shape[2];
        const std::string l = name.substr(std::string("model.layers.").size(), x - std::string("model.layers.").size());
        for (int64_t s = 0; s < 2; ++s) {
          std::vector<float> part;
          for (int64_t e = 0; e < E; ++e)
            part.insert(part.end(), v.begin() + (e * 2 * I + s * I) * H, v.begin() + (e * 2 * I + (s + 1) * I) * H);
          w.add_tensor("blk." + l + (s ? ".ffn_up_exps.weight" : ".ffn_gate_exps.weight"), {H, I, E}, o.type,
                       encode_values(part.data(), static_cast<int64_t>(part.size()), o.type));
        }
        continue;
      }
      if (const size_t x = name.find(".block_sparse_moe.output_linear.weight"); x != std::string::npos) {
        const std::string l = name.substr(std::string("model.layers.").size(), x - std::string("model.layers.").size());
        w.add_tensor("blk." + l + ".ffn_down_exps.weight", {t.shape[2], t.shape[1], t.shape[0]}, o.type,
                     encode_values(v.data(), t.numel(), o.type));
        continue;
      }
      const size_t xm = name.find(".mlp.experts."), xb = name.find(".block_sparse_moe.experts."),
                   xf = name.find(".feed_forward.experts.");
      if (const size_t x = xm != std::string::npos ? xm : xb != std::string::npos ? xb : xf; x != std::string::npos) {
        // model.layers.L.mlp.experts.E.{gate,up,down}_proj.weight, or Mixtral's
        // model.layers.L.block_sparse_moe.experts.E.{w1,w3,w2}.weight (gate, up, down), or LFM2-MoE's
        // model.layers.L.feed_forward.experts.E.{w1,w3,w2}.weight
        const size_t a0 = std::string("model.layers.").size();
        const size_t e0 = name.find('.', name.find(".experts.", x) + 1) + 1;
        const size_t e1 = name.find('.', e0);
        std::string kind = name.substr(e1 + 1, name.find(xm != std::string::npos ? "_proj" : ".weight") - e1 - 1);
        if (kind == "w1") kind = "gate";
        if (kind == "w3") kind = "up";
        if (kind == "w2") kind = "down";
        const std::pair<std::string, std::string> key{name.substr(a0, x - a0), kind};
        experts[key][std::stoll(name.substr(e0, e1 - e0))] = std::move(v);
        expert_shape[key] = t.shape;
        continue;
      }
      const int64_t row = t.ndim() == 2 ? t.shape[1] : 1;
      // convert_hf_to_gguf.py's Gemma models store every RMSNorm weight as 1 + w (its norm_shift).
      if ((a == "gemma3" || a == "gemma2" || a == "gemma") && name.size() > 11 && name.compare(name.size() - 11, 11, "norm.weight") == 0)
        for (float& x : v) x += 1.0f;
      // GraniteModel and SmolLM3Model convert as LlamaModel (Q/K rows permuted for ggml's pair RoPE).
      const bool llama_rope = a == "llama" || a == "granite" || a == "granitemoe" || a == "smollm3";
      if (llama_rope && name.find("q_proj") != std::string::npos) v = permute_rows(v, heads, row);
      if (llama_rope && name.find("k_proj") != std::string::npos) v = permute_rows(v, kv_heads, row);
      std::vector<int64_t> ne(t.shape.rbegin(), t.shape.rend());
      if (name.find("shared_expert_gate") != std::string::npos) ne = {t.numel()};  // squeezed, as the converter does
      if (lfm2 && name.find(".conv.conv.weight") != std::string::npos) ne = {t.shape[2], t.shape[0]};  // [H, 1, L] squeezed
      const uint32_t type = t.ndim() == 2 ? whole_blocks_or_f32(o.type, row) : kGgmlF32;
      w.add_tensor(converter_tensor_name(name, a), ne, type, encode_values(v.data(), t.numel(), type));
    }
  }
  for (const auto& [key, by_expert] : experts) {  // blk.L.ffn_{gate,up,down}_exps: [E, rows, cols]
    std::vector<float> v;
    for (const auto& [e, values] : by_expert) v.insert(v.end(), values.begin(), values.end());
    const std::vector<int64_t>& shape = expert_shape.at(key);
    const std::vector<int64_t> ne{shape[1], shape[0], static_cast<int64_t>(by_expert.size())};
    const uint32_t type = whole_blocks_or_f32(o.type, shape[1]);
    w.add_tensor("blk." + key.first + ".ffn_" + key.second + "_exps.weight", ne, type,
                 encode_values(v.data(), static_cast<int64_t>(v.size()), type));
  }
  w.write(out, o.version, o.alignment);
}

// Copies f's metadata into w (the scalar types and the string/i32/f32 arrays the tests write).
inline void copy_metadata(const GgufFile& f, GgufWriter& w) {
  for (const auto& [k, v] : f.metadata()) {
    switch (v.type) {
      case GgufType::kString: w.add_string(k, v.value.get<std::string>()); break;
      case GgufType::kU32: w.add_u32(k, v.value.get<uint32_t>()); break;
      case GgufType::kI32: w.add_i32(k, v.value.get<int32_t>()); break;
      case GgufType::kF32: w.add_f32(k, v.value.get<float>()); break;
      case GgufType::kBool: w.add_bool(k, v.value.get<bool>()); break;
      case GgufType::kArray:
        if (v.array_type == GgufType::kString) w.add_string_array(k, v.value.get<std::vector<std::string>>());
        if (v.array_type == GgufType::kI32) w.add_i32_array(k, v.value.get<std::vector<int32_t>>());
        break;
      default: break;
    }
  }
}

// Splits the GGUF file `src` into n shards <prefix>-0000i-of-0000n.gguf as gguf-split does:
// all metadata in the first, split.no / split.count / split.tensors.count in each, tensors dealt
// out in order. Returns the shard paths.
inline std::vector<std::string> split_gguf(const std::string& src, const std::string& prefix, int n) {
  GgufFile f(src);
  std::vector<std::string> paths;
  const size_t per = (f.tensors().size() + n - 1) / n;
  for (int i = 0; i < n; ++i) {
    GgufWriter w;
    if (i == 0) copy_metadata(f, w);
    w.add_raw("split.no", 2, GgufWriter::pod(static_cast<uint16_t>(i)));
    w.add_raw("split.count", 2, GgufWriter::pod(static_cast<uint16_t>(n)));
    w.add_i32("split.tensors.count", static_cast<int32_t>(f.tensors().size()));
    for (size_t t = i * per; t < std::min(f.tensors().size(), (i + 1) * per); ++t) {
      const auto& info = f.tensors()[t];
      w.add_tensor(info.name, info.ne, info.type,
                   std::string(reinterpret_cast<const char*>(f.tensor_data(info)), info.nbytes));
    }
    char name[64];
    std::snprintf(name, sizeof(name), "-%05d-of-%05d.gguf", i + 1, n);
    paths.push_back(prefix + name);
    w.write(paths.back());
  }
  return paths;
}

// convert_hf_to_gguf.py's does_token_look_special (the part that matters for these tokenizers).
inline bool looks_special(const std::string& t) {
  return t.size() >= 4 && t.rfind("<|", 0) == 0 && t.compare(t.size() - 2, 2, "|>") == 0;
}

// tokenizer.ggml.* of the tokenizer.json/tokenizer_config.json in `dir`, as the converter writes them.
inline void add_tokenizer_metadata(GgufWriter& w, const std::string& dir, const std::string& pre) {
  const nlohmann::json tj = read_json(dir + "/tokenizer.json");
  const nlohmann::json tc = read_json(dir + "/tokenizer_config.json");
  std::map<int64_t, std::string> vocab;
  for (auto& [tok, id] : tj["model"]["vocab"].items()) vocab[id.get<int64_t>()] = tok;
  std::map<int64_t, std::pair<std::string, bool>> added;
  for (const auto& t : tj["added_tokens"]) added[t["id"]] = {t["content"], t["special"]};
  const int64_t n = std::max(vocab.rbegin()->first, added.rbegin()->first) + 1;
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  for (int64_t i = 0; i < n; ++i) {
    if (auto it = added.find(i); it != added.end()) {
      tokens.push_back(it->second.first);
      types.push_back(it->second.second || looks_special(it->second.first) ? 3 : 4);
    } else if (auto v = vocab.find(i); v != vocab.end()) {
      tokens.push_back(v->second);
      types.push_back(1);
    } else {
      tokens.push_back("[PAD" + std::to_string(i) + "]");
      types.push_back(5);
    }
  }
  std::vector<std::string> merges;
  for (const auto& m : tj["model"]["merges"])
    merges.push_back(m.is_string() ? m.get<std::string>() : m[0].get<std::string>() + " " + m[1].get<std::string>());
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", pre);
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  w.add_i32_array("tokenizer.ggml.token_type", types);
  w.add_string_array("tokenizer.ggml.merges", merges);
  auto id_of = [&](const std::string& key) -> int64_t {  // a string, or an AddedToken object (DeepSeek-V3)
    if (!tc.contains(key)) return -1;
    const nlohmann::json& v = tc[key].is_object() ? tc[key]["content"] : tc[key];
    if (!v.is_string()) return -1;
    for (int64_t i = 0; i < n; ++i)
      if (tokens[i] == v.get<std::string>()) return i;
    return -1;
  };
  if (int64_t id = id_of("bos_token"); id >= 0) w.add_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(id));
  if (int64_t id = id_of("eos_token"); id >= 0) w.add_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(id));
  if (int64_t id = id_of("pad_token"); id >= 0) w.add_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(id));
  w.add_bool("tokenizer.ggml.add_bos_token", tc.value("add_bos_token", false));
  if (tc.contains("chat_template") && tc["chat_template"].is_string())
    w.add_string("tokenizer.chat_template", tc["chat_template"].get<std::string>());
}

// tokenizer.ggml.* of a SentencePiece tokenizer.json (Llama-2 style: BPE with byte fallback). The
// converter reads scores from tokenizer.model; here a piece's score is minus the rank of its first
// merge, which is what the merges of tokenizer.json were sorted by.
inline void add_spm_tokenizer_metadata(GgufWriter& w, const std::string& dir) {
  const nlohmann::json tj = read_json(dir + "/tokenizer.json");
  const nlohmann::json tc = read_json(dir + "/tokenizer_config.json");
  std::map<std::string, int64_t> rank;
  int64_t r = 0;
  for (const auto& m : tj["model"]["merges"]) {
    const std::string s = m.is_string() ? m.get<std::string>() : m[0].get<std::string>() + " " + m[1].get<std::string>();
    const std::string joined = s.substr(0, s.find(' ')) + s.substr(s.find(' ') + 1);
    rank.emplace(joined, r++);
  }
  std::map<int64_t, std::string> vocab;
  for (auto& [tok, id] : tj["model"]["vocab"].items()) vocab[id.get<int64_t>()] = tok;
  std::map<int64_t, bool> special;
  for (const auto& t : tj["added_tokens"]) special[t["id"]] = t["special"];
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  const std::string unk = tj["model"].value("unk_token", "");
  for (const auto& [id, tok] : vocab) {
    tokens.push_back(tok);
    auto it = rank.find(tok);
    scores.push_back(it == rank.end() ? 0.0f : -static_cast<float>(it->second));
    const bool byte = tok.size() == 6 && tok.rfind("<0x", 0) == 0 && tok.back() == '>';
    types.push_back(tok == unk ? 2 : special.count(id) ? (special[id] ? 3 : 4) : byte ? 6 : 1);
  }
  w.add_string("tokenizer.ggml.model", "llama");
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  std::string b = GgufWriter::pod(uint32_t{6}) + GgufWriter::pod(static_cast<uint64_t>(scores.size()));
  for (float x : scores) b += GgufWriter::pod(x);
  w.add_raw("tokenizer.ggml.scores", 9, b);
  w.add_i32_array("tokenizer.ggml.token_type", types);
  for (const auto& [key, field] : {std::pair<const char*, const char*>{"tokenizer.ggml.bos_token_id", "bos_token"},
                                   {"tokenizer.ggml.eos_token_id", "eos_token"},
                                   {"tokenizer.ggml.unknown_token_id", "unk_token"}})
    if (tc.contains(field) && tc[field].is_string())
      w.add_u32(key, static_cast<uint32_t>(tj["model"]["vocab"][tc[field].get<std::string>()].get<int64_t>()));
  w.add_bool("tokenizer.ggml.add_bos_token", tc.value("add_bos_token", true));
  if (tc.contains("chat_template") && tc["chat_template"].is_string())
    w.add_string("tokenizer.chat_template", tc["chat_template"].get<std::string>());
}

}  // namespace vireo::testing
