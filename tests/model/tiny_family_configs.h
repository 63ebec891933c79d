// Tiny configs (vocab 256, hidden 64, 4 layers) of the families added after the fixture-backed ones, for
// dummy-weight tests on both backends: arch_smoke_test.cc (CPU: chunked paged prefill vs one shot) and
// tests/cuda_graph/families_cuda_test.cc (CUDA fp32 with graphs vs the CPU).
#pragma once
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

namespace vireo::testing {

using nlohmann::json;

inline json tiny(const char* arch) {
  return {{"architectures", {arch}}, {"vocab_size", 256}, {"hidden_size", 64}, {"intermediate_size", 96},
          {"num_hidden_layers", 4}, {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"head_dim", 16},
          {"max_position_embeddings", 256}};
}

inline std::vector<json> family_configs() {
  std::vector<json> out;
  json exaone = tiny("Exaone4ForCausalLM");
  exaone["sliding_window"] = 5;
  out.push_back(exaone);
  json olmo3 = tiny("Olmo3ForCausalLM");
  olmo3["sliding_window"] = 6;
  out.push_back(olmo3);
  json glm = tiny("Glm4MoeForCausalLM");
  for (auto [k, v] : {std::pair{"n_routed_experts", 8}, std::pair{"num_experts_per_tok", 2},
                      std::pair{"moe_intermediate_size", 32}, std::pair{"n_group", 2}, std::pair{"topk_group", 1}})
    glm[k] = v;
  glm["use_qk_norm"] = true;
  glm["attention_bias"] = true;
  out.push_back(glm);
  json lfm = tiny("Lfm2MoeForCausalLM");
  for (auto [k, v] : {std::pair{"num_experts", 8}, std::pair{"num_experts_per_tok", 2},
                      std::pair{"moe_intermediate_size", 32}, std::pair{"num_dense_layers", 1}})
    lfm[k] = v;
  lfm["layer_types"] = {"conv", "full_attention", "conv", "full_attention"};
  out.push_back(lfm);
  json olmoe = tiny("OlmoeForCausalLM");
  olmoe["num_experts"] = 8;
  olmoe["num_experts_per_tok"] = 2;
  out.push_back(olmoe);
  json ernie = tiny("Ernie4_5ForCausalLM");
  ernie["use_bias"] = true;
  out.push_back(ernie);
  json hy = tiny("HunYuanMoEV1ForCausalLM");  // Hunyuan-A13B's per-layer lists
  for (const char* k : {"num_experts", "moe_topk", "moe_intermediate_size", "num_shared_expert"}) hy[k] = json::array();
  for (int l = 0; l < 4; ++l) {
    hy["num_experts"].push_back(4), hy["moe_topk"].push_back(2), hy["moe_intermediate_size"].push_back(32);
    hy["num_shared_expert"].push_back(1);
  }
  hy["rope_scaling"] = {{"type", "dynamic"}, {"alpha", 1000.0}, {"factor", 1.0}};
  out.push_back(hy);
  json vl = {{"architectures", {"Qwen3VLMoeForConditionalGeneration"}}, {"text_config", tiny("Qwen3VLMoeForConditionalGeneration")}};
  vl["text_config"]["num_experts"] = 4;
  vl["text_config"]["num_experts_per_tok"] = 2;
  vl["text_config"]["moe_intermediate_size"] = 32;
  out.push_back(vl);
  return out;
}

}  // namespace vireo::testing
