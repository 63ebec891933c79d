// DeepSeek-V3 on the CPU with dummy weights: config parsing (MLA dims, router fields, errors naming the
// field), then the model's own consistency: chunked prefill and scattered blocks == one shot, decode
// token by token == the prompt's per-position logits, two sequences in one step == separate runs.
// Parity with transformers is in parity_test.cc (fixture deepseek_v3).
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "core/error.h"
#include "model/model.h"
#include "model/model_config.h"
#include "model_test_util.h"

namespace vireo {
namespace {

using nlohmann::json;
using testing::SeqDriver;

json tiny_config() {
  return json{{"architectures", {"DeepseekV3ForCausalLM"}},
              {"model_type", "deepseek_v3"},
              {"vocab_size", 300},
              {"hidden_size", 64},
              {"intermediate_size", 96},
              {"moe_intermediate_size", 32},
              {"num_hidden_layers", 3},
              {"num_attention_heads", 4},
              {"num_key_value_heads", 4},
              {"head_dim", 16},
              {"q_lora_rank", 48},
              {"kv_lora_rank", 32},
              {"qk_nope_head_dim", 32},
              {"qk_rope_head_dim", 16},
              {"v_head_dim", 32},
              {"n_routed_experts", 8},
              {"num_experts_per_tok", 2},
              {"n_shared_experts", 1},
              {"n_group", 2},
              {"topk_group", 1},
              {"routed_scaling_factor", 2.5},
              {"norm_topk_prob", true},
              {"first_k_dense_replace", 1},
              {"rope_interleave", true},
              {"max_position_embeddings", 256},
              {"rms_norm_eps", 1e-6},
              {"tie_word_embeddings", false},
              {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 10000.0}}}};
}

std::unique_ptr<Model> dummy(const json& cfg, uint64_t seed) {
  LoadOptions o;
  o.load_format = "dummy";
  o.seed = seed;
  return load_model(ModelConfig::from_json(cfg, "deepseek.json"), "", create_backend("cpu"), o);
}

std::vector<int32_t> prompt(int n, int salt) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back((i * 7919 + salt * 104729 + 13) % 300);
  return ids;
}

TEST(DeepseekConfig, ParsesMlaAndRouter) {
  ModelConfig c = ModelConfig::from_json(tiny_config(), "deepseek.json");
  EXPECT_EQ(c.head_dim, 48);  // qk_nope + qk_rope
  EXPECT_EQ(c.rotary_dim(), 16);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_TRUE(c.mla_attention());
  EXPECT_EQ(c.mla.q_lora_rank, 48);
  EXPECT_EQ(c.mla.v_head_dim, 32);
  EXPECT_TRUE(c.mla.rope_interleave);
  EXPECT_NEAR(c.attention_scale, 1.0 / std::sqrt(48.0), 1e-7);
  EXPECT_EQ(c.num_experts, 8);
  EXPECT_TRUE(c.moe_sigmoid);
  EXPECT_EQ(c.moe_n_group, 2);
  EXPECT_EQ(c.moe_topk_group, 1);
  EXPECT_FLOAT_EQ(c.routed_scaling_factor, 2.5f);
  EXPECT_EQ(c.n_shared_experts, 1);
  EXPECT_FALSE(c.moe_layer(0));
  EXPECT_TRUE(c.moe_layer(1));
  EXPECT_TRUE(c.moe_layer(2));
  json nq = tiny_config();
  nq["q_lora_rank"] = nullptr;
  EXPECT_EQ(ModelConfig::from_json(nq, "x").mla.q_lora_rank, 0);
}

TEST(DeepseekConfig, V2FollowsTransformersV2) {
  json j = tiny_config();
  j["architectures"] = {"DeepseekV2ForCausalLM"};
  j["model_type"] = "deepseek_v2";
  j["topk_method"] = "greedy";
  j["scoring_func"] = "softmax";
  j["rope_interleave"] = false;  // not a V2 field: V2 always rotates complex pairs
  j["rms_norm_eps"] = 1e-5;
  j["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 10000.0}, {"factor", 40.0}, {"mscale_all_dim", 1.0}};
  ModelConfig c = ModelConfig::from_json(j, "v2.json");
  EXPECT_TRUE(c.moe_softmax_fp32);
  EXPECT_FALSE(c.moe_sigmoid);
  EXPECT_FALSE(c.norm_topk_prob);  // ignored by transformers' V2 gate
  EXPECT_EQ(c.moe_n_group, 1);
  EXPECT_TRUE(c.mla.rope_interleave);
  EXPECT_FLOAT_EQ(c.mla.norm_eps, 1e-6f);
  EXPECT_NEAR(c.attention_scale, 1.0 / std::sqrt(48.0), 1e-7);  // no mscale in V2
  j["topk_method"] = "group_limited_greedy";
  EXPECT_THROW(ModelConfig::from_json(j, "v2.json"), Error);
}

// HF: scaling = qk_head_dim^-0.5 * yarn_get_mscale(factor, mscale_all_dim)^2 for non-default RoPE.
TEST(DeepseekConfig, YarnMscaleScalesTheSoftmax) {
  json j = tiny_config();
  j["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 10000.0}, {"factor", 40.0}, {"mscale", 1.0},
                          {"mscale_all_dim", 1.0}, {"original_max_position_embeddings", 64}};
  ModelConfig c = ModelConfig::from_json(j, "x");
  const double m = 0.1 * std::log(40.0) + 1.0;
  EXPECT_NEAR(c.attention_scale, m * m / std::sqrt(48.0), 1e-6);
}

TEST(DeepseekConfig, ErrorsNameTheField) {
  auto expect_field = [](json j, const std::string& field) {
    try {
      ModelConfig::from_json(j, "cfg.json");
      ADD_FAILURE() << "no error for " << field;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("'" + field + "'"), std::string::npos) << e.what();
    }
  };
  json j = tiny_config();
  j.erase("kv_lora_rank");
  expect_field(j, "kv_lora_rank");
  j = tiny_config();
  j["v_head_dim"] = 64;
  expect_field(j, "v_head_dim");
  j = tiny_config();
  j["n_group"] = 3;
  expect_field(j, "n_group");
  j = tiny_config();
  j["topk_group"] = 3;
  expect_field(j, "topk_group");
  j = tiny_config();
  j["num_key_value_heads"] = 2;
  expect_field(j, "num_key_value_heads");
  j = tiny_config();
  j["scoring_func"] = "softmax";
  expect_field(j, "scoring_func");
  j = tiny_config();
  j["qk_rope_head_dim"] = 15;
  expect_field(j, "qk_rope_head_dim");
  j = tiny_config();
  j["moe_layer_freq"] = 2;
  expect_field(j, "moe_layer_freq");
}

class DeepseekModel : public ::testing::TestWithParam<int> {
 protected:
  // 0: q_lora_rank set, interleaved RoPE; 1: q_proj (q_lora_rank null), rotate_half RoPE; 2: one group.
  json config() const {
    json j = tiny_config();
    if (GetParam() == 1) {
      j["q_lora_rank"] = nullptr;
      j["rope_interleave"] = false;
      j["qk_nope_head_dim"] = 24;
      j["v_head_dim"] = 40;  // > qk_rope: padded V, wider than the rope part
    }
    if (GetParam() == 3) {  // DeepSeek-V2 (greedy softmax gate)
      j["architectures"] = {"DeepseekV2ForCausalLM"};
      j["model_type"] = "deepseek_v2";
      j["topk_method"] = "greedy";
    }
    if (GetParam() == 2) {
      j["n_group"] = 1;
      j["topk_group"] = 1;
      j["n_shared_experts"] = 2;
      j["first_k_dense_replace"] = 0;
    }
    return j;
  }
};

TEST_P(DeepseekModel, KvBytesCountExpandedHeads) {
  auto m = dummy(config(), 1);
  const ModelConfig& c = m->config();
  EXPECT_EQ(m->kv_block_bytes(16), size_t(3) * 2 * 4 * c.head_dim * 16 * sizeof(float));
}

TEST_P(DeepseekModel, ChunkedPrefillAndScatteredBlocksMatchOneShot) {
  auto m = dummy(config(), 3);
  const auto ids = prompt(30, 2);
  const int64_t V = m->config().vocab_size;
  KvCache kv = m->allocate_kv_cache(16, 8);
  SeqDriver ref{*m, kv, testing::contiguous_table(4)};
  auto full = ref.step(ids, true);
  ASSERT_EQ(full.size(), ids.size() * V);
  float lo = 1e30f, hi = -1e30f;
  for (float v : full) {
    ASSERT_TRUE(std::isfinite(v));
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  EXPECT_GT(hi - lo, 1e-3f);
  SeqDriver scattered{*m, kv, {13, 5, 9, 15}};
  auto sc = scattered.step(ids, true);
  EXPECT_LT(testing::rel_max_err(sc.data(), full.data(), full.size()), 1e-5);
  SeqDriver chunked{*m, kv, {6, 14, 4, 12}};
  for (size_t b = 0; b < ids.size(); b += 7) {
    std::vector<int32_t> chunk(ids.begin() + b, ids.begin() + std::min(ids.size(), b + 7));
    auto lg = chunked.step(chunk, true);
    EXPECT_LT(testing::rel_max_err(lg.data(), full.data() + b * V, lg.size()), 1e-5) << "chunk at " << b;
  }
  m->free_kv_cache(kv);
}

TEST_P(DeepseekModel, DecodeMatchesRecompute) {
  auto m = dummy(config(), 4);
  const auto ids = prompt(20, 5);
  const int64_t V = m->config().vocab_size;
  KvCache kv = m->allocate_kv_cache(8, 4);
  SeqDriver ref{*m, kv, {0, 1, 2, 3, 4}};
  auto full = ref.step(ids, true);
  SeqDriver dec{*m, kv, {7, 5, 6}};  // 12 tokens in blocks the reference did not use: prefill 4, decode 8
  auto lg = dec.step({ids.begin(), ids.begin() + 4}, true);
  EXPECT_LT(testing::rel_max_err(lg.data(), full.data(), lg.size()), 1e-5);
  for (size_t i = 4; i < 12; ++i) {
    auto one = dec.step({ids[i]});
    EXPECT_LT(testing::rel_max_err(one.data(), full.data() + i * V, V), 1e-5) << "position " << i;
  }
  m->free_kv_cache(kv);
}

TEST_P(DeepseekModel, TwoSequencesInOneStepMatchSeparateRuns) {
  auto m = dummy(config(), 5);
  const int64_t V = m->config().vocab_size;
  KvCache kv = m->allocate_kv_cache(8, 16);
  const auto a = prompt(5, 3), b = prompt(19, 4);
  SeqDriver da{*m, kv, {0}}, db{*m, kv, {1, 2}};
  auto la = da.step(a), lb = db.step(b);
  StepInput in;
  in.token_ids = a;
  in.token_ids.insert(in.token_ids.end(), b.begin(), b.end());
  for (int i = 0; i < 5; ++i) {
    in.positions.push_back(i);
    in.slot_mapping.push_back(3 * 16 + i);
  }
  for (int i = 0; i < 19; ++i) {
    in.positions.push_back(i);
    in.slot_mapping.push_back((i < 16 ? 4 : 5) * 16 + i % 16);
  }
  in.query_start = {0, 5, 24};
  in.seq_lens = {5, 19};
  in.max_blocks_per_seq = 2;
  in.block_tables = {3, 0, 4, 5};
  in.logits_indices = {4, 23};
  std::vector<float> both;
  m->forward(in, kv, both);
  EXPECT_LT(testing::rel_max_err(both.data(), la.data(), V), 1e-5);
  EXPECT_LT(testing::rel_max_err(both.data() + V, lb.data(), V), 1e-5);
  m->free_kv_cache(kv);
}

INSTANTIATE_TEST_SUITE_P(Variants, DeepseekModel, ::testing::Values(0, 1, 2, 3));

}  // namespace
}  // namespace vireo
