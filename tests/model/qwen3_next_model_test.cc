// Qwen3-Next / Qwen3.5 / Qwen3.5-MoE on the CPU before the transformers fixtures: config parsing
// (text_config of the multimodal wrappers, layer kinds, family defaults), the model vs a naive
// HF-formula forward over the same HF-named random tensors (qwen3_next_reference.h), and the state
// slots: chunked prefill == one shot == token-by-token decode, two sequences in one step on their own
// slots == each alone, a reused slot restarting, dummy weights for every architecture name.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backend/backend.h"
#include "core/error.h"
#include "model/decoder_model.h"
#include "model_test_util.h"
#include "qwen3_next_reference.h"
#include "qwen3_next_test_model.h"

namespace vireo {
namespace {

using nlohmann::json;
using testing::SeqDriver;
using testing::qwen3_next_source;
using testing::text_json;
constexpr double kTol = 2e-4;

// Qwen3-Next as its config.json has it: no layer_types (full_attention_interval), a dense layer 0.
json next_json() {
  json j = text_json("Qwen3NextForCausalLM", true);
  j.erase("layer_types");
  j["full_attention_interval"] = 2;
  j["mlp_only_layers"] = {0};
  j["norm_topk_prob"] = true;
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}, {"partial_rotary_factor", 0.25}};
  return j;
}

// The released form: Qwen3_5MoeForConditionalGeneration with the text model in text_config.
json wrapper_json() {
  json t = text_json("Qwen3_5MoeForConditionalGeneration", true);
  t.erase("architectures");
  t.erase("intermediate_size");  // Qwen3_5MoeTextConfig has none
  t["model_type"] = "qwen3_5_moe_text";
  return {{"architectures", {"Qwen3_5MoeForConditionalGeneration"}}, {"model_type", "qwen3_5_moe"},
          {"tie_word_embeddings", false}, {"text_config", t}, {"vision_config", {{"depth", 1}}}};
}

std::unique_ptr<DecoderModel> make(const json& j, bool wrapper = false, int slots = 8) {
  ModelConfig c = ModelConfig::from_json(j, "tiny/config.json");
  LoadOptions o;
  o.max_graph_batch_size = slots;
  o.max_num_seqs = slots;
  return std::make_unique<DecoderModel>(c, find_arch_spec(c.architecture), create_backend("cpu"), qwen3_next_source(wrapper), o);
}

std::vector<int32_t> prompt(int n, int seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids(n);
  for (auto& t : ids) t = static_cast<int32_t>(rng() % 128);
  return ids;
}

std::vector<float> one_shot(Model& m, const std::vector<int32_t>& ids) {
  KvCache kv = m.allocate_kv_cache(16, 4);
  SeqDriver d{m, kv, testing::contiguous_table(16)};
  auto lg = d.step(ids, true);
  m.free_kv_cache(kv);
  return lg;
}

TEST(Qwen3NextConfig, WrapperTextConfigAndDefaults) {
  const ModelConfig c = ModelConfig::from_json(wrapper_json(), "x/config.json");
  EXPECT_EQ(c.architecture, "Qwen3_5MoeForConditionalGeneration");
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.num_experts, 8);
  EXPECT_EQ(c.shared_expert_intermediate_size, 48);
  EXPECT_TRUE(c.norm_topk_prob);  // Qwen3.5-MoE always renormalises
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.rotary_dim(), 4);
  EXPECT_EQ(c.linear_layers, (std::vector<uint8_t>{1, 0, 1, 0}));
  EXPECT_EQ(c.linear_attn.num_v_heads, 4);
  EXPECT_EQ(c.linear_attn.head_k_dim, 8);

  json j = next_json();
  j.erase("head_dim");
  j.erase("rope_parameters");
  j.erase("full_attention_interval");
  j["num_hidden_layers"] = 8;
  const ModelConfig n = ModelConfig::from_json(j, "x/config.json");
  EXPECT_EQ(n.head_dim, 256);
  EXPECT_EQ(n.rotary_dim(), 64);  // partial_rotary_factor 0.25 by default
  EXPECT_EQ(n.linear_layers, (std::vector<uint8_t>{1, 1, 1, 0, 1, 1, 1, 0}));
  EXPECT_FALSE(n.moe_layer(0));
  EXPECT_TRUE(n.moe_layer(1));

  json bad = text_json("Qwen3_5ForCausalLM", false);
  bad["layer_types"][1] = "sliding_attention";
  EXPECT_THROW(ModelConfig::from_json(bad, "x/config.json"), Error);
}

struct Variant {
  const char* name;
  json j;
  bool wrapper, interleaved;
};

std::vector<Variant> variants() {
  return {{"qwen3_5", text_json("Qwen3_5ForCausalLM", false), false, false},
          {"qwen3_next", next_json(), false, true},
          {"qwen3_5_moe_vl", wrapper_json(), true, false}};
}

TEST(Qwen3NextModel, MatchesNaiveReference) {
  for (const auto& v : variants()) {
    SCOPED_TRACE(v.name);
    auto m = make(v.j, v.wrapper);
    const auto src = qwen3_next_source(v.wrapper);
    testing::Qwen3NextReference ref(m->config(), *src, v.interleaved);
    const auto ids = prompt(12, 1);
    const auto want = ref.logits(ids), got = one_shot(*m, ids);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_LT(testing::rel_max_err(got.data(), want.data(), got.size()), kTol);
    float lo = want[0], hi = want[0];
    for (float x : want) lo = std::min(lo, x), hi = std::max(hi, x);
    EXPECT_GT(hi - lo, 0.5f);  // not degenerate
  }
}

TEST(Qwen3NextModel, KvCacheHasNoPagesForDeltaNetLayers) {
  auto m = make(text_json("Qwen3_5ForCausalLM", false), false, 6);
  EXPECT_EQ(m->num_state_slots(), 6);
  KvCache kv = m->allocate_kv_cache(5, 4);
  EXPECT_TRUE(kv.k[0].empty() && kv.v[0].empty());
  EXPECT_EQ(kv.k[1].shape, (std::vector<int64_t>{5, 4, 2, 16}));
  EXPECT_EQ(m->kv_block_bytes(4), size_t{4} * 4 * 2 * (2 * 2 * 16));
  m->free_kv_cache(kv);
}

// 23 tokens in one step, in chunks of 5, 1 and 2 (shorter than the conv's L - 1 = 3), and by
// greedy decode: every position's logits agree.
TEST(Qwen3NextModel, ChunkedPrefillAndDecodeMatchOneShot) {
  for (const auto& v : variants()) {
    SCOPED_TRACE(v.name);
    auto m = make(v.j, v.wrapper);
    const int64_t V = m->config().vocab_size;
    const auto ids = prompt(23, 2);
    const auto full = one_shot(*m, ids);
    KvCache kv = m->allocate_kv_cache(16, 4);
    for (size_t chunk : {size_t{5}, size_t{1}, size_t{2}}) {
      SeqDriver d{*m, kv, {7, 3, 9, 0, 12, 5, 11, 2}};
      for (size_t b = 0; b < ids.size(); b += chunk) {
        std::vector<int32_t> part(ids.begin() + b, ids.begin() + std::min(ids.size(), b + chunk));
        auto lg = d.step(part, true);
        ASSERT_LT(testing::rel_max_err(lg.data(), full.data() + b * V, lg.size()), kTol) << "chunk " << chunk << " at " << b;
      }
    }
    m->free_kv_cache(kv);
  }
}

// One step with a decode row of a on slot 5 and a whole prompt b on slot 2, against each alone;
// then a new sequence c reusing a's slot from position 0.
TEST(Qwen3NextModel, BatchedSequencesOnTheirOwnSlots) {
  auto m = make(next_json());
  const int64_t V = m->config().vocab_size;
  const auto a = prompt(9, 3), b = prompt(7, 4), c = prompt(6, 5);
  const auto fa = one_shot(*m, a), fb = one_shot(*m, b), fc = one_shot(*m, c);
  KvCache kv = m->allocate_kv_cache(16, 4);
  StepInput in;
  auto add_seq = [&](const std::vector<int32_t>& ids, int start, int end, const std::vector<int32_t>& table, int slot) {
    for (int p = start; p < end; ++p) {
      in.token_ids.push_back(ids[p]);
      in.positions.push_back(p);
      in.slot_mapping.push_back(table[p / 4] * 4 + p % 4);
    }
    in.query_start.push_back(static_cast<int32_t>(in.token_ids.size()));
    in.seq_lens.push_back(end);
    in.logits_indices.push_back(in.query_start.back() - 1);
    for (int i = 0; i < 3; ++i) in.block_tables.push_back(i < static_cast<int>(table.size()) ? table[i] : 0);
    in.state_slots.push_back(slot);
  };
  auto run = [&] {
    std::vector<float> out;
    m->forward(in, kv, out);
    in = StepInput();
    in.query_start = {0};
    in.max_blocks_per_seq = 3;
    return out;
  };
  in.query_start = {0};
  in.max_blocks_per_seq = 3;
  add_seq(a, 0, 8, {0, 1, 2}, 5);
  run();
  add_seq(a, 8, 9, {0, 1, 2}, 5);
  add_seq(b, 0, 7, {3, 4}, 2);
  auto out = run();
  ASSERT_EQ(out.size(), size_t(2 * V));
  EXPECT_LT(testing::rel_max_err(out.data(), fa.data() + 8 * V, V), kTol);
  EXPECT_LT(testing::rel_max_err(out.data() + V, fb.data() + 6 * V, V), kTol);
  add_seq(c, 0, 6, {5, 6}, 5);  // slot 5 still holds a's state: position 0 resets it
  out = run();
  EXPECT_LT(testing::rel_max_err(out.data(), fc.data() + 5 * V, V), kTol);
  add_seq(c, 0, 6, {5, 6}, 8);  // past num_state_slots()
  EXPECT_THROW(m->forward(in, kv, out), Error);
  m->free_kv_cache(kv);
}

// --load-format dummy builds every architecture name from its config alone; steps give finite logits.
TEST(Qwen3NextModel, DummyWeightsLoad) {
  std::vector<json> configs = {text_json("Qwen3_5ForCausalLM", false), text_json("Qwen3_5MoeForCausalLM", true),
                               next_json(), wrapper_json()};
  json dense_vl = wrapper_json();
  dense_vl["architectures"] = {"Qwen3_5ForConditionalGeneration"};
  dense_vl["model_type"] = "qwen3_5";
  dense_vl["text_config"] = text_json("Qwen3_5ForCausalLM", false);
  dense_vl["text_config"].erase("architectures");
  configs.push_back(dense_vl);
  for (const auto& j : configs) {
    SCOPED_TRACE(j["architectures"][0].get<std::string>());
    LoadOptions o;
    o.load_format = "dummy";
    o.seed = 3;
    o.max_graph_batch_size = 4;
    o.max_num_seqs = 4;
    auto m = load_model(ModelConfig::from_json(j, "x/config.json"), "", create_backend("cpu"), o);
    EXPECT_EQ(m->num_state_slots(), 4);
    KvCache kv = m->allocate_kv_cache(8, 4);
    SeqDriver d{*m, kv, testing::contiguous_table(8)};
    auto lg = d.step(prompt(10, 7));
    lg = d.step({5});
    for (float v : lg) ASSERT_TRUE(std::isfinite(v));
    m->free_kv_cache(kv);
  }
}

}  // namespace
}  // namespace vireo
