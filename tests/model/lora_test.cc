// LoRA adapters (DecoderModel::add_lora): a PEFT adapter on a fixture checkpoint gives the logits of the
// checkpoint whose weights are merged by hand, W + (alpha / r) * B @ A (what PEFT's merge_and_unload
// writes), for every kind of step: a prefill, decode steps, and batches mixing base rows with the rows
// of two adapters. Also the adapter reader's refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <unistd.h>

#include "core/error.h"
#include "model/lora_adapter.h"
#include "model/model.h"
#include "model_test_util.h"
#include "lora_util.h"

namespace vireo {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::RawTensor;

using testing::AdapterModule;
using testing::raw_of;

struct LoraCheckpoints : ::testing::TestWithParam<std::string> {
  fs::path fixture = fs::path(VIREO_SOURCE_DIR) / "tests/fixtures/model" / GetParam();
  fs::path root = fs::path(::testing::TempDir()) / ("vireo_lora_" + std::to_string(::getpid()));
  void SetUp() override {
    fs::remove_all(root);
    fs::create_directories(root);
  }
  void TearDown() override { fs::remove_all(root); }
  fs::path write_adapter(const std::string& name, const std::vector<AdapterModule>& modules, uint32_t seed,
                         bool rslora = false, float default_alpha = 16.0f) {
    return testing::write_lora_adapter(fixture, root, name, modules, seed, rslora, default_alpha);
  }
};

// Runs steps over several sequences on one model; each sequence has its own blocks and adapter id.
struct Batch {
  Model& model;
  KvCache& kv;
  struct Seq {
    std::vector<int32_t> table;
    int len = 0;
    int32_t lora = 0;
  };
  std::vector<Seq> seqs;

  // tokens[s]: sequence s's tokens this step (empty: not in the step); returns each scheduled
  // sequence's last-token logits, in order.
  std::vector<std::vector<float>> step(const std::vector<std::vector<int32_t>>& tokens) {
    StepInput in;
    in.query_start = {0};
    int width = 0;
    for (const Seq& s : seqs) width = std::max(width, static_cast<int>(s.table.size()));
    in.max_blocks_per_seq = width;
    std::vector<int> order;
    for (size_t s = 0; s < seqs.size(); ++s) {
      if (tokens[s].empty()) continue;
      order.push_back(static_cast<int>(s));
      Seq& q = seqs[s];
      for (size_t i = 0; i < tokens[s].size(); ++i) {
        const int p = q.len + static_cast<int>(i);
        in.token_ids.push_back(tokens[s][i]);
        in.positions.push_back(p);
        in.slot_mapping.push_back(q.table[p / kv.block_size] * kv.block_size + p % kv.block_size);
      }
      q.len += static_cast<int>(tokens[s].size());
      in.query_start.push_back(static_cast<int>(in.token_ids.size()));
      in.seq_lens.push_back(q.len);
      in.logits_indices.push_back(static_cast<int>(in.token_ids.size()) - 1);
      std::vector<int32_t> row = q.table;
      row.resize(width, 0);
      in.block_tables.insert(in.block_tables.end(), row.begin(), row.end());
      in.lora_ids.push_back(q.lora);
    }
    std::vector<float> logits;
    model.forward(in, kv, logits);
    const int64_t V = model.config().vocab_size;
    std::vector<std::vector<float>> out;
    for (size_t i = 0; i < order.size(); ++i) out.emplace_back(logits.begin() + i * V, logits.begin() + (i + 1) * V);
    return out;
  }
};

const std::vector<int32_t> kPromptA = {5, 17, 30, 2, 9, 41, 77, 8, 8, 10, 3, 25, 6, 19, 11, 4, 12, 7};
const std::vector<int32_t> kPromptB = {14, 3, 3, 28, 1, 9, 22};

// The last-token logits of kPrompt then two decode tokens, solo, on the model at `dir` (no adapter).
std::vector<std::vector<float>> solo(const fs::path& dir, const std::vector<int32_t>& prompt) {
  auto model = load_model(dir.string(), create_backend("cpu"), {});
  KvCache kv = model->allocate_kv_cache(8, 16);
  testing::SeqDriver d{*model, kv, testing::contiguous_table(4)};
  std::vector<std::vector<float>> out;
  out.push_back(d.step(prompt));
  out.push_back(d.step({21}));
  out.push_back(d.step({13}));
  model->free_kv_cache(kv);
  return out;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  EXPECT_LT(testing::rel_max_err(got.data(), want.data(), got.size()), 2e-5) << what;
}

TEST_P(LoraCheckpoints, AdapterRowsEqualMergedWeightsInMixedBatches) {
  const json cfg = json::parse(std::ifstream(fixture / "config.json"));
  const bool fused = GetParam() == "phi3";  // q/k/v and gate/up fused in the checkpoint
  std::vector<AdapterModule> m1, m2;
  if (fused) {
    m1 = {{"self_attn.qkv_proj", 4, 16}, {"self_attn.o_proj", 4, 16}, {"mlp.gate_up_proj", 4, 16}, {"mlp.down_proj", 4, 16}};
    m2 = {{"self_attn.qkv_proj", 2, 8}};
  } else {
    m1 = {{"self_attn.q_proj", 4, 16}, {"self_attn.k_proj", 4, 16}, {"self_attn.v_proj", 4, 16},
          {"self_attn.o_proj", 4, 16}, {"mlp.gate_proj", 4, 16},   {"mlp.up_proj", 4, 16},
          {"mlp.down_proj", 8, 32}};  // another rank and alpha (alpha_pattern)
    m2 = {{"self_attn.v_proj", 2, 8}, {"mlp.up_proj", 2, 4}};
  }
  const fs::path a1 = write_adapter("a1", m1, 1), a2 = write_adapter("a2", m2, 2, /*rslora=*/true, 8.0f);
  const auto want_base_a = solo(fixture, kPromptA), want_base_b = solo(fixture, kPromptB);
  const auto want1_a = solo(root / "a1_merged", kPromptA), want1_b = solo(root / "a1_merged", kPromptB);
  const auto want2_b = solo(root / "a2_merged", kPromptB);
  // The adapters change the logits (else the comparisons below prove nothing).
  EXPECT_GT(testing::rel_max_err(want1_a[0].data(), want_base_a[0].data(), want1_a[0].size()), 1e-3);
  EXPECT_GT(testing::rel_max_err(want2_b[0].data(), want_base_b[0].data(), want2_b[0].size()), 1e-3);

  auto model = load_model(fixture.string(), create_backend("cpu"), {});
  model->add_lora(1, load_lora_adapter(a1.string()));
  model->add_lora(2, load_lora_adapter(a2.string()));
  KvCache kv = model->allocate_kv_cache(32, 16);
  // Sequences: A with adapter 1, B base, B with adapter 1, B with adapter 2, A base.
  Batch b{*model, kv, {{{0, 1}, 0, 1}, {{2, 3}, 0, 0}, {{4, 5}, 0, 1}, {{6, 7}, 0, 2}, {{8, 9}, 0, 0}}};
  auto prefill = b.step({kPromptA, kPromptB, kPromptB, kPromptB, kPromptA});
  expect_close(prefill[0], want1_a[0], "A + a1 prefill");
  expect_close(prefill[1], want_base_b[0], "B base prefill");
  expect_close(prefill[2], want1_b[0], "B + a1 prefill");
  expect_close(prefill[3], want2_b[0], "B + a2 prefill");
  expect_close(prefill[4], want_base_a[0], "A base prefill");
  for (int t = 1; t <= 2; ++t) {  // decode steps: one token each (the fused decode forms' range)
    const int32_t tok = t == 1 ? 21 : 13;
    auto dec = b.step({{tok}, {tok}, {tok}, {tok}, {tok}});
    expect_close(dec[0], want1_a[t], "A + a1 decode");
    expect_close(dec[1], want_base_b[t], "B base decode");
    expect_close(dec[2], want1_b[t], "B + a1 decode");
    expect_close(dec[3], want2_b[t], "B + a2 decode");
    expect_close(dec[4], want_base_a[t], "A base decode");
  }
  model->remove_lora(2);
  EXPECT_THROW(b.step({{}, {}, {}, {5}, {}}), Error);  // adapter 2 is gone
  model->free_kv_cache(kv);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, LoraCheckpoints, ::testing::Values("qwen3", "llama3", "olmo2", "granite", "phi3"));

struct LoraRefusals : ::testing::Test {
  fs::path root = fs::path(::testing::TempDir()) / ("vireo_lora_bad_" + std::to_string(::getpid()));
  void SetUp() override {
    fs::remove_all(root);
    fs::create_directories(root);
  }
  void TearDown() override { fs::remove_all(root); }
  // An adapter whose tensors are `names` (A [r, in], B [out, r] by their suffix) and config `cfg`.
  fs::path write(const std::string& name, json cfg, const std::vector<std::string>& names, int r = 4, int64_t in = 64,
                 int64_t out = 64) {
    std::map<std::string, RawTensor> t;
    for (const auto& n : names) {
      const bool a = n.find("lora_A") != std::string::npos;
      t[n] = raw_of(std::vector<float>(static_cast<size_t>(a ? r * in : out * r), 0.1f),
                    a ? std::vector<int64_t>{r, in} : std::vector<int64_t>{out, r});
    }
    const fs::path dir = root / name;
    fs::create_directories(dir);
    testing::write_safetensors(dir / "adapter_model.safetensors", t);
    std::ofstream(dir / "adapter_config.json") << cfg.dump();
    return dir;
  }
};

const std::string kQ = "base_model.model.model.layers.0.self_attn.q_proj";

TEST_F(LoraRefusals, ReaderRefusesWhatItCannotApply) {
  const json ok = {{"r", 4}, {"lora_alpha", 8}};
  const LoraAdapter a = load_lora_adapter(write("ok", ok, {kQ + ".lora_A.weight", kQ + ".lora_B.weight"}).string());
  ASSERT_EQ(a.modules.size(), 1u);
  EXPECT_EQ(a.modules[0].layer, 0);
  EXPECT_EQ(a.modules[0].module, "self_attn.q_proj");
  EXPECT_FLOAT_EQ(a.modules[0].scale, 2.0f);
  // PEFT's adapter-name infix (".default") is taken too.
  EXPECT_NO_THROW(load_lora_adapter(write("named", ok, {kQ + ".lora_A.default.weight", kQ + ".lora_B.default.weight"}).string()));
  auto refuses = [&](const std::string& name, json cfg, std::vector<std::string> names, const std::string& why, int max_rank = 0) {
    try {
      load_lora_adapter(write(name, cfg, names).string(), max_rank);
      ADD_FAILURE() << name << ": no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << name << ": " << e.what();
    }
  };
  const std::vector<std::string> q = {kQ + ".lora_A.weight", kQ + ".lora_B.weight"};
  refuses("dora", {{"use_dora", true}}, q, "use_dora");
  refuses("bias", {{"bias", "all"}}, q, "bias");
  refuses("fan", {{"fan_in_fan_out", true}}, q, "fan_in_fan_out");
  refuses("save", {{"modules_to_save", {"lm_head"}}}, q, "modules_to_save");
  refuses("rank", ok, q, "--max-lora-rank", 2);
  refuses("half", ok, {kQ + ".lora_A.weight"}, "lora_A without lora_B");
  refuses("head", ok, {"base_model.model.lm_head.lora_A.weight", "base_model.model.lm_head.lora_B.weight"}, "lm_head");
  refuses("embed", ok, {"base_model.model.model.embed_tokens.lora_embedding_A"}, "embeddings");
  refuses("prompt", {{"peft_type", "PROMPT_TUNING"}}, q, "peft_type");
  EXPECT_THROW(load_lora_adapter((root / "missing").string()), Error);
}

TEST_F(LoraRefusals, ModelRefusesModulesItDoesNotHave) {
  const fs::path fixture = fs::path(VIREO_SOURCE_DIR) / "tests/fixtures/model/qwen3_moe";
  const json cfg = json::parse(std::ifstream(fixture / "config.json"));
  const int64_t hidden = cfg["hidden_size"];
  auto model = load_model(fixture.string(), create_backend("cpu"), {});
  const json ok = {{"r", 4}, {"lora_alpha", 8}};
  auto add = [&](const std::string& name, const std::string& module, int64_t in, int64_t out) {
    const std::string k = "base_model.model.model.layers.0." + module;
    model->add_lora(7, load_lora_adapter(write(name, ok, {k + ".lora_A.weight", k + ".lora_B.weight"}, 4, in, out).string()));
    model->remove_lora(7);
  };
  const int64_t H = cfg["num_attention_heads"], D = cfg.value("head_dim", hidden / H);
  EXPECT_NO_THROW(add("q", "self_attn.q_proj", hidden, H * D));
  EXPECT_THROW(add("qbad", "self_attn.q_proj", hidden + 1, H * D), Error);      // shape
  EXPECT_THROW(add("expert", "mlp.experts.0.gate_proj", hidden, 8), Error);     // experts: not supported
  EXPECT_THROW(add("dense", "mlp.gate_proj", hidden, 8), Error);                // a MoE layer has no dense MLP
  EXPECT_THROW(model->add_lora(0, LoraAdapter{}), Error);                       // ids start at 1
}

}  // namespace
}  // namespace vireo
