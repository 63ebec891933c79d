// Speculative decoding (n-gram drafts) on CUDA: steps whose decode rows carry drafts run eagerly as
// multi-token rows; greedy tokens equal those of the same engine without drafts (fp32, the qwen3
// fixture), and drafts are kept. Skipped without a GPU.
#include <gtest/gtest.h>

#include <filesystem>

#include "backend/backend.h"
#include "engine/llm.h"
#include "tokenizer/default_dir.h"

namespace vireo {
namespace {

namespace fs = std::filesystem;

EngineConfig cuda_config(const std::string& spec) {
  EngineConfig c;
  c.model = (fs::path(VIREO_SOURCE_DIR) / "tests/fixtures/model/qwen3").string();
  c.tokenizer = default_tokenizer_dir();
  c.device = "cuda";
  c.dtype = "float32";
  c.max_model_len = 256;
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = 64;
  c.kv_cache_memory_bytes = size_t{64} << 20;
  c.speculative_config = spec;
  return c;
}

TEST(SpeculativeCuda, GreedyTokensEqualThoseWithoutDrafts) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU visible";
  if (!fs::exists(fs::path(default_tokenizer_dir()) / "tokenizer.json")) GTEST_SKIP() << "models/qwen3 missing";
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 5; ++i) {
    std::vector<int32_t> ids;
    for (int j = 0; j < 30; ++j) ids.push_back(((j % (3 + i)) * 37 + i * 11 + 5) % 500);
    prompts.push_back(ids);
  }
  SamplingParams sp;
  sp.temperature = 0.0f;
  sp.max_tokens = 40;
  sp.ignore_eos = true;
  std::vector<std::vector<int32_t>> want, got;
  for (const auto& r : LLM(cuda_config("")).generate(prompts, sp)) want.push_back(r.output.token_ids);
  LLM llm(cuda_config(R"({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 1,
                          "prompt_lookup_max": 3})"));
  for (const auto& r : llm.generate(prompts, sp)) got.push_back(r.output.token_ids);
  EXPECT_EQ(got, want);
  const EngineStats s = llm.engine().stats();
  EXPECT_GT(s.spec_num_accepted_tokens, 0u);
  std::printf("CUDA: drafts %llu, draft tokens %llu, accepted %llu\n", (unsigned long long)s.spec_num_drafts,
              (unsigned long long)s.spec_num_draft_tokens, (unsigned long long)s.spec_num_accepted_tokens);
}

}  // namespace
}  // namespace vireo
