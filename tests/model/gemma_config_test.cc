// Gemma (1)'s config.json (google/gemma-2b's fields, trimmed sizes): GemmaConfig's defaults where a field is
// absent, the MLP's activation from hidden_activation (GELU-tanh when absent, whatever hidden_act says), no
// window or soft-capping; and the model runs with dummy weights.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/backend.h"
#include "core/error.h"
#include "model/model.h"
#include "model/model_config.h"

namespace vireo {
namespace {

using nlohmann::json;

json hub() {
  return {{"architectures", {"GemmaForCausalLM"}}, {"model_type", "gemma"}, {"vocab_size", 300},
          {"hidden_size", 64}, {"intermediate_size", 128}, {"num_hidden_layers", 2}, {"num_attention_heads", 4},
          {"num_key_value_heads", 1}, {"head_dim", 32}, {"hidden_act", "gelu"},
          {"hidden_activation", "gelu_pytorch_tanh"}, {"rope_theta", 10000.0}, {"torch_dtype", "float32"}};
}

TEST(GemmaConfig, HubConfigAndDefaults) {
  ModelConfig c = ModelConfig::from_json(hub(), "g/config.json");
  EXPECT_EQ(c.hidden_act, "gelu_pytorch_tanh");
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.layer_window(0), 0);
  EXPECT_EQ(c.attn_logit_softcapping, 0.0f);
  EXPECT_EQ(c.final_logit_softcapping, 0.0f);
  EXPECT_EQ(c.bos_token_id.value_or(-1), 2);
  json j = hub();
  j.erase("hidden_activation");  // GemmaMLP ignores hidden_act: GELU-tanh
  EXPECT_EQ(ModelConfig::from_json(j, "g/config.json").hidden_act, "gelu_pytorch_tanh");
  c = ModelConfig::from_json(json{{"architectures", {"GemmaForCausalLM"}}}, "g/config.json");
  EXPECT_EQ(c.vocab_size, 256000);
  EXPECT_EQ(c.hidden_size, 3072);
  EXPECT_EQ(c.num_key_value_heads, 16);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.max_position_embeddings, 8192);
}

TEST(GemmaConfig, RunsWithDummyWeights) {
  LoadOptions o;
  o.load_format = "dummy";
  auto m = load_model(ModelConfig::from_json(hub(), "g/config.json"), "", create_backend("cpu"), o);
  KvCache kv = m->allocate_kv_cache(4, 16);
  StepInput in;
  in.token_ids = {1, 2, 3};
  in.positions = {0, 1, 2};
  in.slot_mapping = {16, 17, 18};
  in.query_start = {0, 3};
  in.seq_lens = {3};
  in.max_blocks_per_seq = 1;
  in.block_tables = {1};
  in.logits_indices = {2};
  std::vector<float> logits;
  m->forward(in, kv, logits);
  ASSERT_EQ(logits.size(), 300u);
  for (float x : logits) ASSERT_TRUE(std::isfinite(x));
  m->free_kv_cache(kv);
}

}  // namespace
}  // namespace vireo
