// The parts of an HF config.json the engine and layers need, plus the raw JSON for arch files.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace vireo {

// rope_scaling / rope_parameters of config.json (HF names). type: default | linear | dynamic | llama3 | yarn.
struct RopeScaling {
  std::string type = "default";
  float factor = 1.0f;
  bool factor_set = true;  // false: absent from the config (YaRN then derives it from the context lengths)
  // llama3
  float low_freq_factor = 1.0f, high_freq_factor = 4.0f;
  int original_max_position_embeddings = 0;  // llama3, yarn (0: max_position_embeddings)
  // yarn
  float beta_fast = 32.0f, beta_slow = 1.0f;
  std::optional<float> attention_factor, mscale, mscale_all_dim;
  bool truncate = true;
  // longrope (Phi-3 "su"): per-frequency divisors of inv_freq below / from original_max_position_embeddings
  std::vector<float> short_factor, long_factor;
  // dynamic NTK-alpha (HunYuan): base = theta * alpha ** (dim / (dim - 2))
  std::optional<float> alpha;
  // Per-frequency divisors of inv_freq (GGUF's rope_freqs.weight: llama.cpp stores llama3 scaling
  // this way), applied after the type's own scaling; empty: none.
  std::vector<float> freq_factors;
};

struct ModelConfig {
  std::string architecture;  // architectures[0], e.g. "Qwen3ForCausalLM"
  std::string model_type;
  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_hidden_layers = 0;
  int num_attention_heads = 0;
  int num_key_value_heads = 0;
  int head_dim = 0;
  int max_position_embeddings = 0;
  float rms_norm_eps = 1e-6f;
  bool tie_word_embeddings = false;
  std::string torch_dtype = "float32";  // checkpoint dtype ("dtype" in newer configs)
  std::vector<int32_t> eos_token_ids;   // config.json eos_token_id (int or list)
  std::optional<int32_t> bos_token_id;
  float rope_theta = 10000.0f;          // top level or rope_parameters.rope_theta
  RopeScaling rope_scaling;
  float partial_rotary_factor = 1.0f;   // rotary_dim = head_dim * factor
  bool attention_bias = false;          // q/k/v/o biases
  bool mlp_bias = false;                // gate/up/down biases
  bool qkv_bias_off = false;            // config "qkv_bias": false (Qwen2-MoE) drops the family's q/k/v biases
  std::string hidden_act = "silu";       // silu / swish, or gelu_pytorch_tanh / gelu_new (dense MLPs)
  // Sliding-window attention: the window (keys per query, itself included) of the layers that use
  // it, 0 when none does; sliding_layers[l] != 0 for those layers ([num_hidden_layers] when the
  // window is set, else empty).
  int sliding_window = 0;
  std::vector<uint8_t> sliding_layers;
  int layer_window(int l) const { return sliding_window > 0 && sliding_layers[l] ? sliding_window : 0; }
  // Sparse MoE MLPs (architectures whose ArchSpec has moe): layer l is sparse unless it is in
  // mlp_only_layers or (l + 1) is not a multiple of decoder_sparse_step (HF Qwen3-MoE's rule).
  int num_experts = 0;  // num_experts, or num_local_experts (transformers 5 writes that)
  int num_experts_per_tok = 0;
  int moe_intermediate_size = 0;
  bool norm_topk_prob = false;
  int decoder_sparse_step = 1;
  std::vector<int> mlp_only_layers;
  bool moe_layer(int l) const;
  // Hybrid short-convolution layers (LFM2, model_config_lfm2.cc): layer l is a gated short conv
  // instead of attention where conv_layers[l] (from layer_types / full_attn_idxs; empty: none).
  // conv_kernel: its length L (conv_L_cache); conv_bias: in_proj / conv / out_proj biases.
  std::vector<uint8_t> conv_layers;
  int conv_kernel = 0;
  bool conv_bias = false;
  bool conv_layer(int l) const { return l >= 0 && l < static_cast<int>(conv_layers.size()) && conv_layers[l]; }

  // DeepSeek-V2/V3 (model_config_deepseek.cc): multi-head latent attention when mla.kv_lora_rank > 0.
  // head_dim is then the attention head dim qk_nope + qk_rope (config.json's head_dim is the rope
  // width), num_key_value_heads = num_attention_heads: the KV cache holds the expanded per-head K and
  // V (V zero-padded to head_dim), not the latent.
  struct Mla {
    int q_lora_rank = 0;  // 0: q_proj (q_lora_rank null), else q_a_proj / q_a_layernorm / q_b_proj
    int kv_lora_rank = 0, qk_nope_head_dim = 0, qk_rope_head_dim = 0, v_head_dim = 0;
    bool rope_interleave = true;  // HF rope_interleave: GPT-J pairs of the rope dims (V2: always)
    float norm_eps = 1e-6f;       // q_a_layernorm / kv_a_layernorm (V3: rms_norm_eps; V2: their default 1e-6)
  } mla;
  bool mla_attention() const { return mla.kv_lora_rank > 0; }
  float attention_scale = 0;  // softmax scale; 0: head_dim^-0.5
  int rope_dim = 0;           // rotary dims when set (MLA: qk_rope_head_dim), else head_dim * partial_rotary_factor
  // DeepSeek-style MoE routing (MoeParams): sigmoid scores with e_score_correction_bias, group limit,
  // scaled weights; n_shared_experts * moe_intermediate_size wide shared expert (mlp.shared_experts);
  // layers below first_k_dense_replace dense.
  bool moe_sigmoid = false;       // DeepSeek-V3's noaux_tc router (MoeScoring::kSigmoid, score bias)
  bool moe_softmax_fp32 = false;  // DeepSeek-V2's greedy gate (MoeScoring::kSoftmaxFp32)
  int moe_n_group = 1, moe_topk_group = 1;
  float routed_scaling_factor = 1.0f;
  bool attention_out_bias = false;  // o_proj has a bias whatever attention_bias says (Seed-OSS's attention_out_bias)
  bool qk_norm_off = false;        // the family's q/k norms are absent (GLM-4.5's use_qk_norm false)
  bool moe_score_bias = true;      // moe_sigmoid's router bias is in the checkpoint (LFM2-MoE: use_expert_bias)
  bool moe_softmax_bias = false;   // moe_softmax_fp32 with a choice bias (ERNIE 4.5 MoE's moe_statics, [1, E])
  float moe_renorm_eps = 1e-20f;   // added to the top-k sum when renormalising (LFM2-MoE: 1e-6)
  int n_shared_experts = 0;
  int first_k_dense_replace = 0;

  // Qwen3-Next / Qwen3.5 (model_config_qwen3_next.cc): Gated DeltaNet layers where linear_layers[l]
  // (config.layer_types "linear_attention", or every layer but each full_attention_interval-th),
  // gated attention elsewhere; MoE layers add a sigmoid-gated shared expert of
  // shared_expert_intermediate_size.
  struct LinearAttn {
    int num_k_heads = 0, num_v_heads = 0, head_k_dim = 0, head_v_dim = 0, conv_kernel = 4;
  } linear_attn;
  std::vector<uint8_t> linear_layers;
  int shared_expert_intermediate_size = 0;
  bool linear_layer(int l) const { return l >= 0 && l < static_cast<int>(linear_layers.size()) && linear_layers[l]; }
  // Width of the shared expert MLP: Qwen3-Next's shared_expert_intermediate_size, else DeepSeek's
  // n_shared_experts * moe_intermediate_size (0: none).
  int64_t shared_expert_width() const {
    return shared_expert_intermediate_size > 0 ? shared_expert_intermediate_size
                                               : static_cast<int64_t>(n_shared_experts) * moe_intermediate_size;
  }

  // SmolLM3 (model_config_smollm3.cc): layers that apply no RoPE where nope_layers[l] (empty: none).
  std::vector<uint8_t> nope_layers;
  bool nope_layer(int l) const { return l >= 0 && l < static_cast<int>(nope_layers.size()) && nope_layers[l]; }

  // Gemma 2 (model_config_gemma.cc): scores and final logits become cap * tanh(x / cap); 0: none.
  float attn_logit_softcapping = 0, final_logit_softcapping = 0;

  // Gemma 3 (model_config_gemma.cc): the sliding-window layers rotate with a default RoPE of base
  // rope_local_theta (rope_local_base_freq) where local_rope_layers[l]; 0: one RoPE for every layer.
  float rope_local_theta = 0;
  std::vector<uint8_t> local_rope_layers;
  bool local_rope_layer(int l) const {
    return rope_local_theta > 0 && l >= 0 && l < static_cast<int>(local_rope_layers.size()) && local_rope_layers[l];
  }

  // GPT-OSS (model_config_gpt_oss.cc): per-head attention sinks (self_attn.sinks), and the experts'
  // clamped SwiGLU when swiglu_limit > 0 (MoeParams).
  bool attention_sinks = false;
  float swiglu_alpha = 1.702f, swiglu_limit = 0;

  // Granite (model_config_granite.cc): embeddings times embedding_multiplier, each layer's attention and
  // MLP outputs times residual_multiplier before their residual add, logits divided by logits_scaling
  // (the attention scale is its attention_multiplier); 0: none.
  float embedding_multiplier = 0, residual_multiplier = 0, logits_scaling = 0;

  int rotary_dim() const { return rope_dim > 0 ? rope_dim : static_cast<int>(head_dim * partial_rotary_factor); }
  nlohmann::json raw;                   // the whole config.json

  // Parses and validates; errors name `source` (a path) and the field.
  static ModelConfig from_json(const nlohmann::json& j, const std::string& source);
  // config with `overrides` merged in (vLLM --hf-overrides): object values merge key by key, recursively;
  // any other value replaces. Throws when overrides is neither null nor an object.
  static nlohmann::json with_overrides(nlohmann::json config, const nlohmann::json& overrides);
  // overrides: vLLM --hf-overrides, merged in first (with_overrides); errors then name them too.
  static ModelConfig from_file(const std::string& config_json_path, const nlohmann::json& overrides = nullptr);
};

// generation_config.json: defaults vLLM applies with --generation-config auto.
struct GenerationConfig {
  std::vector<int32_t> eos_token_ids;
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int> top_k;
  static GenerationConfig from_dir(const std::string& model_dir);  // missing file -> empty
  // The sampling defaults (and eos_token_id) that `j` gives replace this one's; errors name `source`.
  void apply_json(const nlohmann::json& j, const std::string& source);
};

}  // namespace vireo
