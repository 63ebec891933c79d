// Dummy weights, the built-in configs, paged KV layouts and chunked prefill on the default model.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

#include "backend/backend.h"
#include "core/error.h"
#include "model/default_model.h"
#include "model/model.h"
#include "model_test_util.h"

namespace vireo {
namespace {

using testing::SeqDriver;

std::unique_ptr<Model> dummy_default(uint64_t seed) {
  LoadOptions o;
  o.load_format = "dummy";
  o.seed = seed;
  return load_model(default_model_config(), "", create_backend("cpu"), o);
}

std::vector<int32_t> prompt(int n, int salt) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back((i * 7919 + salt * 104729 + 13) % 151000);
  return ids;
}

TEST(DefaultModel, ConfigShape) {
  ModelConfig c = default_model_config();
  EXPECT_EQ(c.architecture, "Qwen3ForCausalLM");
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{151645, 151643}));
  EXPECT_TRUE(c.tie_word_embeddings);
  ModelConfig q = builtin_model_config("qwen3-0.6b");
  EXPECT_EQ(q.num_hidden_layers, 28);
  EXPECT_EQ(q.head_dim, 128);
  EXPECT_FLOAT_EQ(q.rope_theta, 1e6f);
  EXPECT_FALSE(builtin_model_config("qwen3-8b").tie_word_embeddings);
  EXPECT_EQ(builtin_model_config("llama3-8b").rope_scaling.type, "llama3");
  ModelConfig moe = builtin_model_config("qwen3-30b-a3b");  // Qwen3-30B-A3B's config.json
  EXPECT_EQ(moe.architecture, "Qwen3MoeForCausalLM");
  EXPECT_EQ(moe.num_hidden_layers, 48);
  EXPECT_EQ(moe.hidden_size, 2048);
  EXPECT_EQ(moe.num_attention_heads, 32);
  EXPECT_EQ(moe.num_key_value_heads, 4);
  EXPECT_EQ(moe.head_dim, 128);
  EXPECT_EQ(moe.num_experts, 128);
  EXPECT_EQ(moe.num_experts_per_tok, 8);
  EXPECT_EQ(moe.moe_intermediate_size, 768);
  EXPECT_TRUE(moe.norm_topk_prob);
  EXPECT_FALSE(moe.tie_word_embeddings);
  EXPECT_EQ(moe.max_position_embeddings, 40960);
  for (int l : {0, 23, 47}) EXPECT_TRUE(moe.moe_layer(l)) << l;
  EXPECT_THROW(builtin_model_config("gpt5"), Error);
}

TEST(DummyWeights, DeterministicForSeedAndDifferentAcrossSeeds) {
  auto a = dummy_default(7), b = dummy_default(7), c = dummy_default(8);
  std::vector<std::vector<float>> outs;
  for (auto* m : {a.get(), b.get(), c.get()}) {
    KvCache kv = m->allocate_kv_cache(4, 16);
    SeqDriver d{*m, kv, testing::contiguous_table(4)};
    outs.push_back(d.step(prompt(9, 1)));
    m->free_kv_cache(kv);
  }
  ASSERT_EQ(outs[0].size(), 151936u);
  EXPECT_EQ(outs[0], outs[1]);
  EXPECT_NE(outs[0], outs[2]);
  // Not degenerate: logits vary across the vocabulary.
  float lo = outs[0][0], hi = outs[0][0];
  for (float v : outs[0]) {
    ASSERT_TRUE(std::isfinite(v));
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  EXPECT_GT(hi - lo, 1e-3f);
}

// Same prompt through contiguous blocks, scattered blocks, and 7-token prefill chunks.
TEST(DummyModel, ScatteredBlocksAndChunkedPrefillMatch) {
  auto m = dummy_default(3);
  const auto ids = prompt(40, 2);
  const int64_t V = m->config().vocab_size;
  KvCache kv = m->allocate_kv_cache(16, 8);

  SeqDriver ref{*m, kv, testing::contiguous_table(6)};
  auto full = ref.step(ids, /*all_logits=*/true);
  ASSERT_EQ(full.size(), ids.size() * V);

  SeqDriver scattered{*m, kv, {13, 2, 9, 15, 7, 11}};
  auto sc = scattered.step(ids, true);
  EXPECT_LT(testing::rel_max_err(sc.data(), full.data(), full.size()), 1e-5);

  SeqDriver chunked{*m, kv, {6, 14, 1, 12, 8, 10}};
  for (size_t b = 0; b < ids.size(); b += 7) {
    std::vector<int32_t> chunk(ids.begin() + b, ids.begin() + std::min(ids.size(), b + 7));
    auto lg = chunked.step(chunk, true);
    EXPECT_LT(testing::rel_max_err(lg.data(), full.data() + b * V, lg.size()), 1e-5) << "chunk at " << b;
  }
  m->free_kv_cache(kv);
}

TEST(DummyModel, TwoSequencesInOneStepMatchSeparateRuns) {
  auto m = dummy_default(5);
  const int64_t V = m->config().vocab_size;
  KvCache kv = m->allocate_kv_cache(8, 16);
  const auto a = prompt(5, 3), b = prompt(19, 4);
  SeqDriver da{*m, kv, {0}}, db{*m, kv, {1, 2}};
  auto la = da.step(a), lb = db.step(b);

  StepInput in;
  in.token_ids = a;
  in.token_ids.insert(in.token_ids.end(), b.begin(), b.end());
  for (int i = 0; i < 5; ++i) in.positions.push_back(i), in.slot_mapping.push_back(3 * 16 + i);
  for (int i = 0; i < 19; ++i) in.positions.push_back(i), in.slot_mapping.push_back((i < 16 ? 4 : 5) * 16 + i % 16);
  in.query_start = {0, 5, 24};
  in.seq_lens = {5, 19};
  in.max_blocks_per_seq = 2;
  in.block_tables = {3, 0, 4, 5};
  in.logits_indices = {4, 23};
  std::vector<float> both;
  m->forward(in, kv, both);
  ASSERT_EQ(both.size(), 2u * V);
  EXPECT_LT(testing::rel_max_err(both.data(), la.data(), V), 1e-5);
  EXPECT_LT(testing::rel_max_err(both.data() + V, lb.data(), V), 1e-5);
  m->free_kv_cache(kv);
}

}  // namespace
}  // namespace vireo
