// vLLM's --hf-overrides: fields merged into config.json before it is parsed (LoadOptions::hf_overrides).
#include <gtest/gtest.h>

#include <filesystem>

#include "backend/backend.h"
#include "core/error.h"
#include "model/model.h"
#include "model_test_util.h"

namespace vireo {
namespace {

using nlohmann::json;

const std::string kQwen3 = std::string(VIREO_SOURCE_DIR) + "/tests/fixtures/model/qwen3";

TEST(HfOverrides, ObjectsMergeKeyByKeyOtherValuesReplace) {
  const json config = {{"a", 1}, {"rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}}}, {"list", {1, 2}}};
  const json merged = ModelConfig::with_overrides(
      config, {{"a", 2}, {"rope_scaling", {{"factor", 8.0}}}, {"list", {3}}, {"new", "x"}});
  EXPECT_EQ(merged["a"], 2);
  EXPECT_EQ(merged["rope_scaling"], (json{{"rope_type", "yarn"}, {"factor", 8.0}}));
  EXPECT_EQ(merged["list"], json({3}));
  EXPECT_EQ(merged["new"], "x");
  EXPECT_EQ(ModelConfig::with_overrides(config, nullptr), config);
  EXPECT_THROW(ModelConfig::with_overrides(config, json::array()), Error);
}

std::vector<float> logits_of(const LoadOptions& o) {
  auto model = load_model(kQwen3, create_backend("cpu"), o);
  KvCache kv = model->allocate_kv_cache(4, 16);
  testing::SeqDriver d{*model, kv, testing::contiguous_table(4)};
  std::vector<float> out = d.step({3, 14, 15, 92, 65});
  model->free_kv_cache(kv);
  return out;
}

TEST(HfOverrides, ReachTheLoadedModel) {
  LoadOptions o;
  // The fixture (transformers 5) keeps rope_theta inside rope_parameters: the override merges into it.
  o.hf_overrides = {{"max_position_embeddings", 1000}, {"rope_parameters", {{"rope_theta", 10000.0}}}};
  auto model = load_model(kQwen3, create_backend("cpu"), o);
  EXPECT_EQ(model->config().max_position_embeddings, 1000);
  EXPECT_FLOAT_EQ(model->config().rope_theta, 10000.0f);
  EXPECT_NE(logits_of(o), logits_of(LoadOptions{}));  // the fixture's base is 1e6: a different RoPE
  o.hf_overrides = {{"num_attention_heads", "four"}};  // errors name the overrides
  try {
    load_model(kQwen3, create_backend("cpu"), o);
    ADD_FAILURE() << "loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("with --hf-overrides"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace vireo
