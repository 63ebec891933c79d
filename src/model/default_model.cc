#include "model/default_model.h"

#include "core/error.h"

namespace vireo {
namespace {

nlohmann::json qwen3_json(int hidden, int layers, int heads, int kv_heads, int inter, bool tied, int max_pos) {
  return {{"architectures", {"Qwen3ForCausalLM"}},
          {"model_type", "qwen3"},
          {"vocab_size", 151936},
          {"hidden_size", hidden},
          {"intermediate_size", inter},
          {"num_hidden_layers", layers},
          {"num_attention_heads", heads},
          {"num_key_value_heads", kv_heads},
          {"head_dim", 128},
          {"max_position_embeddings", max_pos},
          {"rms_norm_eps", 1e-6},
          {"rope_theta", 1000000.0},
          {"tie_word_embeddings", tied},
          {"attention_bias", false},
          {"hidden_act", "silu"},
          {"torch_dtype", "bfloat16"},
          {"bos_token_id", 151643},
          {"eos_token_id", {151645, 151643}}};
}

}  // namespace

ModelConfig default_model_config() {
  auto j = qwen3_json(256, 4, 4, 2, 768, true, 4096);
  j["head_dim"] = 64;
  return ModelConfig::from_json(j, "builtin:default");
}

ModelConfig qwen3_0_6b_config() {
  return ModelConfig::from_json(qwen3_json(1024, 28, 16, 8, 3072, true, 40960), "builtin:qwen3-0.6b");
}

ModelConfig qwen3_8b_config() {
  return ModelConfig::from_json(qwen3_json(4096, 36, 32, 8, 12288, false, 40960), "builtin:qwen3-8b");
}

// Qwen3-30B-A3B's config.json (Qwen3MoeForCausalLM): 48 layers, all sparse (decoder_sparse_step 1, no
// mlp_only_layers), 128 experts of moe_intermediate 768, top-8 renormalised. intermediate_size 6144 is
// the (unused) dense MLP width. 30.5B parameters, 61 GB of bf16 weights (experts 57.9 GB).
ModelConfig qwen3_30b_a3b_config() {
  auto j = qwen3_json(2048, 48, 32, 4, 6144, false, 40960);
  j["architectures"] = {"Qwen3MoeForCausalLM"};
  j["model_type"] = "qwen3_moe";
  j["moe_intermediate_size"] = 768;
  j["num_experts"] = 128;
  j["num_experts_per_tok"] = 8;
  j["norm_topk_prob"] = true;
  j["decoder_sparse_step"] = 1;
  j["mlp_only_layers"] = nlohmann::json::array();
  return ModelConfig::from_json(j, "builtin:qwen3-30b-a3b");
}

ModelConfig llama3_8b_config() {
  nlohmann::json j = {{"architectures", {"LlamaForCausalLM"}},
                      {"model_type", "llama"},
                      {"vocab_size", 128256},
                      {"hidden_size", 4096},
                      {"intermediate_size", 14336},
                      {"num_hidden_layers", 32},
                      {"num_attention_heads", 32},
                      {"num_key_value_heads", 8},
                      {"max_position_embeddings", 131072},
                      {"rms_norm_eps", 1e-5},
                      {"rope_theta", 500000.0},
                      {"rope_scaling",
                       {{"rope_type", "llama3"},
                        {"factor", 8.0},
                        {"low_freq_factor", 1.0},
                        {"high_freq_factor", 4.0},
                        {"original_max_position_embeddings", 8192}}},
                      {"tie_word_embeddings", false},
                      {"torch_dtype", "bfloat16"},
                      {"bos_token_id", 128000},
                      {"eos_token_id", {128001, 128008, 128009}}};
  return ModelConfig::from_json(j, "builtin:llama3-8b");
}

// google/gemma-3-1b-it's config.json (Gemma3ForCausalLM): 26 layers, 5 of 6 sliding (window 512, RoPE
// base 10k), 4 query heads on 1 KV head of 256 dims, GELU-tanh MLP, 262k tied vocabulary.
ModelConfig gemma3_1b_config() {
  nlohmann::json j = {{"architectures", {"Gemma3ForCausalLM"}},
                      {"model_type", "gemma3_text"},
                      {"vocab_size", 262144},
                      {"hidden_size", 1152},
                      {"intermediate_size", 6912},
                      {"num_hidden_layers", 26},
                      {"num_attention_heads", 4},
                      {"num_key_value_heads", 1},
                      {"head_dim", 256},
                      {"max_position_embeddings", 32768},
                      {"query_pre_attn_scalar", 256},
                      {"rms_norm_eps", 1e-6},
                      {"rope_theta", 1000000.0},
                      {"rope_local_base_freq", 10000.0},
                      {"sliding_window", 512},
                      {"sliding_window_pattern", 6},
                      {"hidden_activation", "gelu_pytorch_tanh"},
                      {"torch_dtype", "bfloat16"},
                      {"bos_token_id", 2},
                      {"eos_token_id", {1, 106}}};
  return ModelConfig::from_json(j, "builtin:gemma3-1b");
}

// google/gemma-2-2b's config.json (Gemma2ForCausalLM): 26 layers, every other one sliding (window 4096),
// 8 query heads on 4 KV heads of 256 dims, soft-capping 50 (scores) and 30 (logits), 256k tied vocabulary.
ModelConfig gemma2_2b_config() {
  nlohmann::json j = {{"architectures", {"Gemma2ForCausalLM"}},
                      {"model_type", "gemma2"},
                      {"vocab_size", 256000},
                      {"hidden_size", 2304},
                      {"intermediate_size", 9216},
                      {"num_hidden_layers", 26},
                      {"num_attention_heads", 8},
                      {"num_key_value_heads", 4},
                      {"head_dim", 256},
                      {"max_position_embeddings", 8192},
                      {"query_pre_attn_scalar", 256},
                      {"rms_norm_eps", 1e-6},
                      {"rope_theta", 10000.0},
                      {"sliding_window", 4096},
                      {"attn_logit_softcapping", 50.0},
                      {"final_logit_softcapping", 30.0},
                      {"hidden_activation", "gelu_pytorch_tanh"},
                      {"torch_dtype", "bfloat16"},
                      {"bos_token_id", 2},
                      {"eos_token_id", {1, 107}}};
  return ModelConfig::from_json(j, "builtin:gemma2-2b");
}

// openai/gpt-oss-20b's config.json (GptOssForCausalLM), its dummy experts MXFP4 as the hub's: 24 layers,
// every other one sliding (window 128), 64 query heads on 8 KV heads of 64 dims with sinks, 32 experts
// top-4 of width 2880, YaRN x32 on a 4096 context, the o200k_harmony vocabulary.
ModelConfig gpt_oss_20b_config() {
  nlohmann::json j = {{"architectures", {"GptOssForCausalLM"}},
                      {"model_type", "gpt_oss"},
                      {"vocab_size", 201088},
                      {"hidden_size", 2880},
                      {"intermediate_size", 2880},
                      {"num_hidden_layers", 24},
                      {"num_attention_heads", 64},
                      {"num_key_value_heads", 8},
                      {"head_dim", 64},
                      {"num_local_experts", 32},
                      {"num_experts_per_tok", 4},
                      {"max_position_embeddings", 131072},
                      {"rms_norm_eps", 1e-5},
                      {"sliding_window", 128},
                      {"attention_bias", true},
                      {"rope_scaling",
                       {{"rope_type", "yarn"}, {"factor", 32.0}, {"beta_fast", 32.0}, {"beta_slow", 1.0},
                        {"truncate", false}, {"original_max_position_embeddings", 4096}}},
                      {"rope_theta", 150000.0},
                      {"swiglu_limit", 7.0},
                      {"tie_word_embeddings", false},
                      {"torch_dtype", "bfloat16"},
                      {"eos_token_id", {200002, 199999, 200012}},
                      {"pad_token_id", 199999}};
  return ModelConfig::from_json(j, "builtin:gpt-oss-20b");
}

// openai/gpt-oss-120b's config.json: gpt-oss-20b's with 36 layers and 128 experts (still top-4). MXFP4
// experts (the default where the backend keeps them packed) make it ~65 GB, one H200; bf16 would be ~240 GB.
ModelConfig gpt_oss_120b_config() {
  ModelConfig c = gpt_oss_20b_config();
  nlohmann::json j = c.raw;
  j["num_hidden_layers"] = 36;
  j["num_local_experts"] = 128;
  return ModelConfig::from_json(j, "builtin:gpt-oss-120b");
}

ModelConfig builtin_model_config(const std::string& name) {
  if (name == "default") return default_model_config();
  if (name == "qwen3-0.6b") return qwen3_0_6b_config();
  if (name == "qwen3-8b") return qwen3_8b_config();
  if (name == "qwen3-30b-a3b") return qwen3_30b_a3b_config();
  if (name == "llama3-8b") return llama3_8b_config();
  if (name == "gemma3-1b") return gemma3_1b_config();
  if (name == "gemma2-2b") return gemma2_2b_config();
  if (name == "gpt-oss-20b") return gpt_oss_20b_config();
  if (name == "gpt-oss-120b") return gpt_oss_120b_config();
  throw Error("--model builtin:" + name +
              ": unknown built-in model (default, qwen3-0.6b, qwen3-8b, qwen3-30b-a3b, llama3-8b, gemma3-1b, gemma2-2b, "
              "gpt-oss-20b, gpt-oss-120b)");
}

}  // namespace vireo
