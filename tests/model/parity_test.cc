// Parity with transformers (fp32) on the tiny fixtures of tools/reference/make_model_fixtures.py:
// RoPE frequencies, per-position prompt logits, chunked prefill, scattered blocks, 32 greedy tokens.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "model/model.h"
#include "model/rope.h"
#include "model_test_util.h"

namespace vireo {
namespace {

using nlohmann::json;
using testing::SeqDriver;

constexpr double kTol = 1e-4;

std::string fixture_dir(const std::string& name) { return std::string(VIREO_SOURCE_DIR) + "/tests/fixtures/model/" + name; }

json load_ref(const std::string& name) {
  std::ifstream f(fixture_dir(name) + "/reference.json");
  return json::parse(f);
}

// Fixtures made on the device machine (torch + transformers). A listed case whose directory is not
// committed yet skips, naming the command that makes it.
class Parity : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(fixture_dir(GetParam()) + "/reference.json"))
      GTEST_SKIP() << "fixture tests/fixtures/model/" << GetParam()
                   << " is not generated yet (tools/reference/make_model_fixtures.py --only " << GetParam() << ")";
  }
};

TEST_P(Parity, RopeFrequenciesMatchTransformers) {
  const json ref = load_ref(GetParam());
  ModelConfig c = ModelConfig::from_file(fixture_dir(GetParam()) + "/config.json");
  EXPECT_EQ(c.architecture, ref["architecture"].get<std::string>());
  RopeFrequencies rf = rope_frequencies(c);
  auto want = ref["inv_freq"].get<std::vector<float>>();
  ASSERT_EQ(rf.inv_freq.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(rf.inv_freq[i], want[i], 1e-6 * std::abs(want[i]) + 1e-12) << i;
  EXPECT_NEAR(rf.attention_scaling, ref["attention_scaling"].get<double>(), 1e-6);
  if (!ref.contains("local_inv_freq")) return;  // Gemma 3: the sliding layers' own default RoPE
  ASSERT_GT(c.rope_local_theta, 0);
  ModelConfig local = c;
  local.rope_theta = c.rope_local_theta;
  local.rope_scaling = RopeScaling{};
  RopeFrequencies lf = rope_frequencies(local);
  auto want_local = ref["local_inv_freq"].get<std::vector<float>>();
  ASSERT_EQ(lf.inv_freq.size(), want_local.size());
  for (size_t i = 0; i < want_local.size(); ++i)
    EXPECT_NEAR(lf.inv_freq[i], want_local[i], 1e-6 * std::abs(want_local[i]) + 1e-12) << i;
}

TEST_P(Parity, LogitsAndGreedyMatchTransformers) {
  const json ref = load_ref(GetParam());
  auto model = load_model(fixture_dir(GetParam()), create_backend("cpu"), LoadOptions{});
  const int64_t V = model->config().vocab_size;
  const auto prompts = ref["prompts"].get<std::vector<std::vector<int32_t>>>();
  KvCache kv = model->allocate_kv_cache(32, 16);

  for (size_t p = 0; p < prompts.size(); ++p) {
    SCOPED_TRACE("prompt " + std::to_string(p));
    const auto& ids = prompts[p];
    // Prompt 2 runs through scattered physical blocks, the others through 0, 1, 2, ...
    std::vector<int32_t> table = p == 2 ? std::vector<int32_t>{29, 3, 17, 8, 22, 11} : testing::contiguous_table(6);
    if (p == 1) {
      for (int i = 0; i < 6; ++i) table[i] += 6;  // keep prompt 1's blocks apart from prompt 0's
    }
    SeqDriver d{*model, kv, table};
    const bool full = p == 1;
    auto logits = d.step(ids, full);
    if (full) {
      auto want = ref["full_logits"].get<std::vector<std::vector<float>>>();
      ASSERT_EQ(logits.size(), want.size() * V);
      for (size_t r = 0; r < want.size(); ++r)
        EXPECT_LT(testing::rel_max_err(logits.data() + r * V, want[r].data(), V), kTol) << "position " << r;
    } else {
      auto want = ref["last_logits"][p].get<std::vector<float>>();
      ASSERT_EQ(logits.size(), want.size());
      EXPECT_LT(testing::rel_max_err(logits.data(), want.data(), V), kTol);
    }
    const float* last = logits.data() + logits.size() - V;
    auto greedy_want = ref["greedy"][p].get<std::vector<int32_t>>();
    std::vector<int32_t> greedy{testing::argmax(last, V)};
    while (greedy.size() < greedy_want.size()) {
      auto lg = d.step({greedy.back()});
      greedy.push_back(testing::argmax(lg.data(), V));
    }
    EXPECT_EQ(greedy, greedy_want);
  }
  model->free_kv_cache(kv);
}

// The 17-token prompt in 7-token chunks must reproduce every per-position logit row.
TEST_P(Parity, ChunkedPrefillMatchesTransformers) {
  const json ref = load_ref(GetParam());
  auto model = load_model(fixture_dir(GetParam()), create_backend("cpu"), LoadOptions{});
  const int64_t V = model->config().vocab_size;
  const auto ids = ref["prompts"][1].get<std::vector<int32_t>>();
  const auto want = ref["full_logits"].get<std::vector<std::vector<float>>>();
  KvCache kv = model->allocate_kv_cache(8, 4);  // block_size 4: chunks straddle block boundaries
  SeqDriver d{*model, kv, {7, 2, 5, 0, 6, 3}};
  for (size_t b = 0; b < ids.size(); b += 7) {
    std::vector<int32_t> chunk(ids.begin() + b, ids.begin() + std::min(ids.size(), b + 7));
    auto lg = d.step(chunk, true);
    for (size_t r = 0; r < chunk.size(); ++r)
      EXPECT_LT(testing::rel_max_err(lg.data() + r * V, want[b + r].data(), V), kTol) << "position " << b + r;
  }
  model->free_kv_cache(kv);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Parity,
                         ::testing::Values("llama3", "llama_yarn_bias", "qwen2", "qwen2_sliding", "qwen3", "qwen3_bf16_sharded", "olmo2",
                                           "hunyuan_dense", "qwen3_moe", "qwen3_moe_mixed", "qwen2_moe", "mixtral", "lfm2", "deepseek_v3",
                                           "deepseek_v3_qproj", "deepseek_v2_lite", "qwen3_5", "qwen3_5_moe",
                                           "qwen3_next", "qwen3_5_vl", "gemma3", "gemma3_vl", "gemma2", "phi3", "smollm3", "glm", "glm4", "gpt_oss", "granite",
                                           "granitemoe", "lfm2_moe", "glm4_moe", "qwen3_vl", "qwen3_vl_moe", "exaone4", "seed_oss", "mistral3",
                                           "olmo3", "olmoe", "ernie4_5", "gemma", "hunyuan_moe",
                                           "ernie4_5_moe", "qwen2_5_vl"));

TEST(ParityConfig, FixtureConfigsParseNewStyleRopeParameters) {
  ModelConfig h = ModelConfig::from_file(fixture_dir("hunyuan_dense") + "/config.json");
  EXPECT_EQ(h.rope_scaling.type, "dynamic");
  ASSERT_TRUE(h.rope_scaling.alpha.has_value());
  EXPECT_FLOAT_EQ(*h.rope_scaling.alpha, 1000.0f);
  ModelConfig q = ModelConfig::from_file(fixture_dir("qwen3") + "/config.json");
  EXPECT_FLOAT_EQ(q.rope_theta, 1e6f);
  EXPECT_EQ(q.head_dim, 32);
  EXPECT_EQ(q.torch_dtype, "float32");
  EXPECT_EQ(ModelConfig::from_file(fixture_dir("qwen3_bf16_sharded") + "/config.json").torch_dtype, "bfloat16");
  GenerationConfig g = GenerationConfig::from_dir(fixture_dir("qwen3"));
  EXPECT_EQ(g.eos_token_ids, std::vector<int32_t>{2});
}

}  // namespace
}  // namespace vireo
