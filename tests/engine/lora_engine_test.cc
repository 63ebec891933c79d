// LoRA end to end through AsyncEngine::create (--enable-lora --lora-modules): greedy tokens of requests
// naming an adapter equal those of the checkpoint with the adapter merged, with base-model requests and
// another adapter's in the same batches; adapters load and unload at run time.
#include <gtest/gtest.h>

#include <filesystem>
#include <unistd.h>

#include "../model/lora_util.h"
#include "core/error.h"
#include "engine/llm.h"
#include "tokenizer/default_dir.h"

namespace vireo {
namespace {

namespace fs = std::filesystem;

struct LoraEngine : ::testing::Test {
  fs::path fixture = fs::path(VIREO_SOURCE_DIR) / "tests/fixtures/model/qwen3";
  fs::path root = fs::path(::testing::TempDir()) / ("vireo_lora_engine_" + std::to_string(::getpid()));
  void SetUp() override {
    if (!fs::exists(fs::path(default_tokenizer_dir()) / "tokenizer.json")) GTEST_SKIP() << "models/qwen3 missing";
    fs::remove_all(root);
    fs::create_directories(root);
  }
  void TearDown() override { fs::remove_all(root); }
  EngineConfig config(const fs::path& model) const {
    EngineConfig c;
    c.model = model.string();
    c.tokenizer = default_tokenizer_dir();  // the fixture has none; prompts are ids below its vocabulary
    c.device = "cpu";
    c.max_model_len = 128;
    c.max_num_seqs = 8;
    c.max_num_batched_tokens = 64;  // prompts of 40 tokens take two steps: chunked prefill with adapters
    return c;
  }
};

std::vector<std::vector<int32_t>> prompts() {
  std::vector<std::vector<int32_t>> p;
  for (int i = 0; i < 4; ++i) {
    std::vector<int32_t> ids;
    for (int j = 0; j < 40 - 7 * i; ++j) ids.push_back((j * 37 + i * 11 + 5) % 500);
    p.push_back(ids);
  }
  return p;
}

SamplingParams greedy(int32_t lora) {
  SamplingParams sp;
  sp.temperature = 0.0f;
  sp.max_tokens = 10;
  sp.ignore_eos = true;
  sp.lora_id = lora;
  return sp;
}

std::vector<std::vector<int32_t>> tokens_of(const std::vector<GenerateResult>& r) {
  std::vector<std::vector<int32_t>> out;
  for (const auto& x : r) out.push_back(x.output.token_ids);
  return out;
}

TEST_F(LoraEngine, AdapterRequestsMatchMergedCheckpoints) {
  using testing::AdapterModule;
  const fs::path a1 = testing::write_lora_adapter(
      fixture, root, "a1", {{"self_attn.q_proj", 8, 16}, {"self_attn.v_proj", 8, 16}, {"mlp.down_proj", 8, 16}}, 11);
  const fs::path a2 = testing::write_lora_adapter(fixture, root, "a2", {{"self_attn.o_proj", 4, 8}, {"mlp.up_proj", 4, 8}},
                                                  12, false, 8.0f);
  const auto p = prompts();
  const auto base = tokens_of(LLM(config(fixture)).generate(p, greedy(0)));
  const auto merged1 = tokens_of(LLM(config(root / "a1_merged")).generate(p, greedy(0)));
  const auto merged2 = tokens_of(LLM(config(root / "a2_merged")).generate(p, greedy(0)));
  ASSERT_NE(base, merged1);  // the adapters change the greedy tokens
  ASSERT_NE(base, merged2);

  EngineConfig c = config(fixture);
  c.enable_lora = true;
  c.max_loras = 2;
  c.lora_modules = {{"a1", a1.string()}};
  LLM llm(c);
  AsyncEngine& e = llm.engine();
  ASSERT_EQ(e.lora_id("a1"), 1);
  e.load_lora("a2", a2.string());  // at run time
  const int32_t id2 = e.lora_id("a2");
  ASSERT_GT(id2, 1);
  EXPECT_EQ(e.loras().size(), 2u);
  EXPECT_THROW(e.load_lora("a2", a2.string()), Error);             // the name is taken
  EXPECT_THROW(e.load_lora("bad", (root / "nothing").string()), Error);
  EXPECT_EQ(e.lora_id("bad"), 0);

  // Every prompt three times in one batch: base, a1, a2 rows side by side.
  std::vector<std::vector<int32_t>> all;
  std::vector<SamplingParams> sps;
  for (const auto& x : p)
    for (int32_t id : {0, 1, id2}) {
      all.push_back(x);
      sps.push_back(greedy(id));
    }
  const auto got = tokens_of(llm.generate(all, sps));
  for (size_t i = 0; i < p.size(); ++i) {
    EXPECT_EQ(got[3 * i], base[i]) << "base " << i;
    EXPECT_EQ(got[3 * i + 1], merged1[i]) << "a1 " << i;
    EXPECT_EQ(got[3 * i + 2], merged2[i]) << "a2 " << i;
  }
  // Again: the prefix cache must not hand one adapter's blocks to another.
  EXPECT_EQ(tokens_of(llm.generate(all, sps)), got);

  e.unload_lora("a2");
  EXPECT_EQ(e.lora_id("a2"), 0);
  EXPECT_THROW(e.unload_lora("a2"), Error);
  EXPECT_THROW(llm.generate({p[0]}, greedy(id2)), Error);  // no longer loaded
  EXPECT_EQ(tokens_of(llm.generate({p[0]}, greedy(1)))[0], merged1[0]);
}

TEST_F(LoraEngine, StartupRefusals) {
  EngineConfig c = config(fixture);
  c.lora_modules = {{"a", (root / "x").string()}};
  EXPECT_THROW(LLM{c}, Error);  // --lora-modules without --enable-lora
  c.enable_lora = true;
  EXPECT_THROW(LLM{c}, Error);  // no adapter there
  const fs::path big = testing::write_lora_adapter(fixture, root, "big", {{"self_attn.q_proj", 32, 32}}, 3);
  c.lora_modules = {{"big", big.string()}};
  EXPECT_THROW(LLM{c}, Error);  // rank 32 > --max-lora-rank 16
  c.max_lora_rank = 32;
  EXPECT_NO_THROW(LLM{c});
}

}  // namespace
}  // namespace vireo
