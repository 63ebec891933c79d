// Every family added without a transformers fixture in the tree yet runs on dummy weights, and its paged,
// chunked prefill gives the one-shot logits: sliding windows, NoPE layers, sparse layers and conv state
// survive block tables and chunk boundaries. (transformers' numbers: the model fixtures of
// tools/reference/make_model_fixtures.py.)
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "model/model.h"
#include "model/model_config.h"
#include "model_test_util.h"

namespace vireo {
namespace {

using nlohmann::json;

json tiny(const char* arch) {
  return {{"architectures", {arch}}, {"vocab_size", 96}, {"hidden_size", 64}, {"intermediate_size", 96},
          {"num_hidden_layers", 4}, {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"head_dim", 16},
          {"max_position_embeddings", 256}};
}

std::vector<json> configs() {
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
  json vl = {{"architectures", {"Qwen3VLMoeForConditionalGeneration"}}, {"text_config", tiny("Qwen3VLMoeForConditionalGeneration")}};
  vl["text_config"]["num_experts"] = 4;
  vl["text_config"]["num_experts_per_tok"] = 2;
  vl["text_config"]["moe_intermediate_size"] = 32;
  out.push_back(vl);
  return out;
}

TEST(ArchSmoke, ChunkedPagedPrefillMatchesOneShot) {
  for (const json& j : configs()) {
    SCOPED_TRACE(j["architectures"][0].get<std::string>());
    const ModelConfig cfg = ModelConfig::from_json(j, "smoke/config.json");
    LoadOptions opts;
    opts.load_format = "dummy";
    auto m = load_model(cfg, "", create_backend("cpu"), opts);
    const int64_t V = m->config().vocab_size;
    std::vector<int32_t> ids;
    for (int i = 0; i < 30; ++i) ids.push_back((i * 37 + 11) % static_cast<int32_t>(V));
    KvCache kv = m->allocate_kv_cache(16, 4);
    testing::SeqDriver one{*m, kv, testing::contiguous_table(8)};
    const std::vector<float> full = one.step(ids, true);
    ASSERT_EQ(full.size(), ids.size() * V);
    for (float x : full) ASSERT_TRUE(std::isfinite(x));
    testing::SeqDriver chunked{*m, kv, {15, 9, 8, 14, 10, 13, 11, 12}};
    for (size_t b = 0; b < ids.size(); b += 7) {
      std::vector<int32_t> chunk(ids.begin() + b, ids.begin() + std::min(ids.size(), b + 7));
      const auto lg = chunked.step(chunk, true);
      EXPECT_LT(testing::rel_max_err(lg.data(), full.data() + b * V, lg.size()), 1e-4) << "chunk at " << b;
    }
    m->free_kv_cache(kv);
  }
}

}  // namespace
}  // namespace vireo
