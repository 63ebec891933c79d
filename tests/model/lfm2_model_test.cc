// LFM2 (hybrid short-conv + attention) before the transformers fixture exists: config parsing and
// field errors, the KV-cache layout of conv layers, and the paged conv state through the model:
// chunked prefill == one-shot prefill, decode == full recompute, batched mixed steps and a shared
// (prefix-cached) prefix == separate full runs, on the tiny random-weight model of lfm2_test_model.h.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/backend.h"
#include "core/error.h"
#include "lfm2_test_model.h"
#include "model_test_util.h"

namespace vireo {
namespace {

using nlohmann::json;
using testing::SeqDriver;
using testing::tiny_lfm2;
using testing::tiny_lfm2_json;

constexpr double kTol = 2e-5;  // fp32, different summation orders only

std::vector<int32_t> prompt(int n, int salt) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back((i * 7919 + salt * 104729 + 13) % 256);
  return ids;
}

// Logits of every position of `ids` in one step over contiguous blocks: the reference.
std::vector<float> one_shot(Model& m, const std::vector<int32_t>& ids, int block_size = 4) {
  KvCache kv = m.allocate_kv_cache(64, block_size);
  SeqDriver d{m, kv, testing::contiguous_table(64)};
  auto out = d.step(ids, true);
  m.free_kv_cache(kv);
  return out;
}

TEST(Lfm2Config, FieldsAndDefaults) {
  ModelConfig c = ModelConfig::from_json(tiny_lfm2_json(), "x/config.json");
  EXPECT_EQ(c.intermediate_size, 192);
  EXPECT_EQ(c.conv_layers, (std::vector<uint8_t>{1, 0, 1, 0}));
  EXPECT_EQ(c.conv_kernel, 3);
  EXPECT_TRUE(c.conv_bias);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-5f);
  EXPECT_TRUE(c.tie_word_embeddings);  // Lfm2Config's default
  EXPECT_FLOAT_EQ(c.rope_theta, 1e6f);

  // The original LFM2 spellings: block_ff_dim, tie_embedding, theta, full_attn_idxs; defaults otherwise.
  json j = tiny_lfm2_json();
  for (const char* k : {"layer_types", "norm_eps", "rope_parameters", "conv_L_cache", "conv_bias",
                        "block_ffn_dim_multiplier", "block_multiple_of"})
    j.erase(k);
  j["block_ff_dim"] = 12288;
  j["tie_embedding"] = false;
  j["theta"] = 5e5;
  j["full_attn_idxs"] = {1, 3};
  c = ModelConfig::from_json(j, "x/config.json");
  EXPECT_EQ(c.intermediate_size, 8192);  // int(2 * 12288 / 3) = 8192, * 1.0, multiple of 256
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FLOAT_EQ(c.rope_theta, 5e5f);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-5f);
  EXPECT_EQ(c.conv_layers, (std::vector<uint8_t>{1, 0, 1, 0}));
  EXPECT_EQ(c.conv_kernel, 3);
  EXPECT_FALSE(c.conv_bias);

  j.erase("full_attn_idxs");  // neither: every layer attends (Lfm2Config)
  j["block_ffn_dim_multiplier"] = nullptr;  // no multiplier: no rounding either
  j["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}, {"rope_theta", 2e4}}}};
  c = ModelConfig::from_json(j, "x/config.json");
  EXPECT_EQ(c.conv_layers, (std::vector<uint8_t>{0, 0, 0, 0}));
  EXPECT_EQ(c.intermediate_size, 8192);
  EXPECT_FLOAT_EQ(c.rope_theta, 2e4f);
  j["block_ff_dim"] = 1000;
  EXPECT_EQ(ModelConfig::from_json(j, "x/config.json").intermediate_size, 666);
  j["block_auto_adjust_ff_dim"] = false;
  EXPECT_EQ(ModelConfig::from_json(j, "x/config.json").intermediate_size, 1000);
}

TEST(Lfm2Config, ErrorsNameTheField) {
  auto error_of = [](const json& j) {
    try {
      ModelConfig::from_json(j, "x/config.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  json j = tiny_lfm2_json();
  j["layer_types"] = {"conv", "sliding_attention", "conv", "full_attention"};
  EXPECT_NE(error_of(j).find("'layer_types' entry 1 'sliding_attention'"), std::string::npos) << error_of(j);
  j["layer_types"] = {"conv", "full_attention"};
  EXPECT_NE(error_of(j).find("'layer_types'"), std::string::npos);
  j = tiny_lfm2_json();
  j.erase("layer_types");
  j["full_attn_idxs"] = {1, 4};
  EXPECT_NE(error_of(j).find("'full_attn_idxs'"), std::string::npos) << error_of(j);
  j = tiny_lfm2_json();
  j["conv_L_cache"] = 0;
  EXPECT_NE(error_of(j).find("'conv_L_cache'"), std::string::npos);
  j["conv_L_cache"] = "3";
  EXPECT_NE(error_of(j).find("'conv_L_cache'"), std::string::npos);
  j = tiny_lfm2_json();
  j["conv_bias"] = 1;
  EXPECT_NE(error_of(j).find("'conv_bias'"), std::string::npos);
  j = tiny_lfm2_json();
  j["block_multiple_of"] = 0;
  EXPECT_NE(error_of(j).find("'block_multiple_of'"), std::string::npos);
  j = tiny_lfm2_json();
  j["norm_eps"] = "small";
  EXPECT_NE(error_of(j).find("'norm_eps'"), std::string::npos);
  j = tiny_lfm2_json();
  j["block_ff_dim"] = 1.5;
  EXPECT_NE(error_of(j).find("'block_ff_dim'"), std::string::npos);
}

// Conv layers keep [num_blocks, block_size, hidden] of state in k and nothing in v; the bytes per
// block count hidden per token for them and K + V for the attention layers.
TEST(Lfm2Model, KvCacheLayout) {
  auto m = tiny_lfm2(create_backend("cpu"));
  KvCache kv = m->allocate_kv_cache(5, 8);
  ASSERT_EQ(kv.k.size(), 4u);
  ASSERT_EQ(kv.v.size(), 4u);
  EXPECT_EQ(kv.k[0].shape, (std::vector<int64_t>{5, 8, 64}));
  EXPECT_TRUE(kv.v[0].empty());
  EXPECT_EQ(kv.k[1].shape, (std::vector<int64_t>{5, 8, 2, 16}));
  EXPECT_EQ(kv.v[1].shape, (std::vector<int64_t>{5, 8, 2, 16}));
  EXPECT_EQ(m->kv_block_bytes(8), size_t{8} * 4 * (64 + 2 * 2 * 16 + 64 + 2 * 2 * 16));
  size_t allocated = 0;
  for (int l = 0; l < 4; ++l) allocated += kv.k[l].nbytes() + (kv.v[l].empty() ? 0 : kv.v[l].nbytes());
  EXPECT_EQ(allocated, 5 * m->kv_block_bytes(8));
  m->free_kv_cache(kv);
}

// The same 37 tokens in one step, in 7-token chunks, and token by token (the fused decode path),
// over scattered blocks of 4: every position's logits agree.
TEST(Lfm2Model, ChunkedPrefillMatchesOneShot) {
  auto m = tiny_lfm2(create_backend("cpu"));
  const auto ids = prompt(37, 1);
  const int64_t V = m->config().vocab_size;
  const auto full = one_shot(*m, ids);
  // Not degenerate: the conv layers change the logits (zeroing their state would be visible).
  float lo = full[0], hi = full[0];
  for (float v : full) lo = std::min(lo, v), hi = std::max(hi, v);
  ASSERT_GT(hi - lo, 0.5f);

  KvCache kv = m->allocate_kv_cache(24, 4);
  for (size_t chunk : {size_t{7}, size_t{1}, size_t{3}}) {
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    SeqDriver d{*m, kv, {17, 3, 9, 0, 21, 12, 5, 11, 2, 19}};
    for (size_t b = 0; b < ids.size(); b += chunk) {
      std::vector<int32_t> part(ids.begin() + b, ids.begin() + std::min(ids.size(), b + chunk));
      auto lg = d.step(part, true);
      EXPECT_LT(testing::rel_max_err(lg.data(), full.data() + b * V, lg.size()), kTol) << "chunk at " << b;
    }
  }
  m->free_kv_cache(kv);
}

// Greedy decode through the caches == a full recompute of prompt + generated tokens at every step.
TEST(Lfm2Model, DecodeMatchesFullRecompute) {
  auto m = tiny_lfm2(create_backend("cpu"));
  const int64_t V = m->config().vocab_size;
  std::vector<int32_t> ids = prompt(9, 2);
  KvCache kv = m->allocate_kv_cache(16, 4);
  SeqDriver d{*m, kv, {6, 14, 1, 12, 8, 10}};
  auto lg = d.step(ids);
  for (int i = 0; i < 12; ++i) {
    const auto full = one_shot(*m, ids);
    ASSERT_LT(testing::rel_max_err(lg.data(), full.data() + (ids.size() - 1) * V, V), kTol) << "step " << i;
    ids.push_back(testing::argmax(lg.data(), V));
    lg = d.step({ids.back()});
  }
  m->free_kv_cache(kv);
}

// One step holding a decode row, a prefill chunk continuing a cached prefix and a whole prompt,
// against each sequence run alone; then a sequence whose first 8 tokens come from another's blocks
// (a prefix-cache hit: only the rest is computed) against its full run.
TEST(Lfm2Model, BatchedStepsAndSharedPrefixMatchSeparateRuns) {
  auto m = tiny_lfm2(create_backend("cpu"));
  const int64_t V = m->config().vocab_size;
  const auto a = prompt(11, 3), b = prompt(13, 4), c = prompt(6, 5);
  const auto fa = one_shot(*m, a), fb = one_shot(*m, b), fc = one_shot(*m, c);

  KvCache kv = m->allocate_kv_cache(32, 4);
  SeqDriver da{*m, kv, {0, 1, 2}}, db{*m, kv, {3, 4, 5, 6}};
  da.step(std::vector<int32_t>(a.begin(), a.end() - 1));  // a: 10 tokens cached, its last one decodes below
  db.step(std::vector<int32_t>(b.begin(), b.begin() + 5));  // b: 5 cached, 8 more below
  StepInput in;
  auto add_seq = [&](const std::vector<int32_t>& ids, int start, const std::vector<int32_t>& table) {
    for (int p = start; p < static_cast<int>(ids.size()); ++p) {
      in.token_ids.push_back(ids[p]);
      in.positions.push_back(p);
      in.slot_mapping.push_back(table[p / 4] * 4 + p % 4);
    }
    in.query_start.push_back(static_cast<int32_t>(in.token_ids.size()));
    in.seq_lens.push_back(static_cast<int32_t>(ids.size()));
    in.logits_indices.push_back(in.query_start.back() - 1);
    for (int i = 0; i < 4; ++i) in.block_tables.push_back(i < static_cast<int>(table.size()) ? table[i] : 0);
  };
  in.query_start = {0};
  in.max_blocks_per_seq = 4;
  add_seq(a, 10, {0, 1, 2});
  add_seq(b, 5, {3, 4, 5, 6});
  add_seq(c, 0, {7, 8});
  std::vector<float> out;
  m->forward(in, kv, out);
  ASSERT_EQ(out.size(), size_t(3 * V));
  EXPECT_LT(testing::rel_max_err(out.data(), fa.data() + 10 * V, V), kTol);
  EXPECT_LT(testing::rel_max_err(out.data() + V, fb.data() + 12 * V, V), kTol);
  EXPECT_LT(testing::rel_max_err(out.data() + 2 * V, fc.data() + 5 * V, V), kTol);

  // d shares a's first 8 tokens (blocks 0 and 1, full) and continues differently.
  std::vector<int32_t> dd(a.begin(), a.begin() + 8);
  for (int32_t t : prompt(6, 6)) dd.push_back(t);
  const auto fd = one_shot(*m, dd);
  SeqDriver sd{*m, kv, {0, 1, 9, 10}};
  sd.len = 8;
  auto lg = sd.step(std::vector<int32_t>(dd.begin() + 8, dd.end()), true);
  EXPECT_LT(testing::rel_max_err(lg.data(), fd.data() + 8 * V, lg.size()), kTol);
  m->free_kv_cache(kv);
}

// --load-format dummy builds an LFM2 from its config alone; steps give finite logits.
TEST(Lfm2Model, DummyWeightsLoad) {
  LoadOptions o;
  o.load_format = "dummy";
  o.seed = 3;
  auto m = load_model(ModelConfig::from_json(tiny_lfm2_json(), "x/config.json"), "", create_backend("cpu"), o);
  KvCache kv = m->allocate_kv_cache(8, 4);
  SeqDriver d{*m, kv, testing::contiguous_table(8)};
  auto lg = d.step(prompt(10, 7));
  lg = d.step({5});
  for (float v : lg) ASSERT_TRUE(std::isfinite(v));
  m->free_kv_cache(kv);
}

}  // namespace
}  // namespace vireo
