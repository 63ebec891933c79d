// Speculative decoding with n-gram drafts, end to end through AsyncEngine::create (--speculative-config)
// on the qwen3 fixture: greedy requests give the tokens they give without drafts, drafts run and some are
// kept, and max_tokens, stop tokens, min_tokens, logprobs and requests that take no drafts (penalties)
// behave as without drafts, side by side in one batch.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/error.h"
#include "engine/llm.h"
#include "tokenizer/default_dir.h"

namespace vireo {
namespace {

namespace fs = std::filesystem;

const fs::path kFixture = fs::path(VIREO_SOURCE_DIR) / "tests/fixtures/model/qwen3";
constexpr const char* kSpec = R"({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 1,
                                   "prompt_lookup_max": 3})";

EngineConfig config(const std::string& spec) {
  EngineConfig c;
  c.model = kFixture.string();
  c.tokenizer = default_tokenizer_dir();
  c.device = "cpu";
  c.max_model_len = 256;
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = 64;
  c.speculative_config = spec;
  return c;
}

// Repetitive prompts (a phrase several times), so prompt lookup finds continuations; plus a plain one.
std::vector<std::vector<int32_t>> prompts() {
  std::vector<std::vector<int32_t>> p;
  for (int i = 0; i < 4; ++i) {
    std::vector<int32_t> ids;
    const int period = 3 + i;
    for (int j = 0; j < 30; ++j) ids.push_back(((j % period) * 37 + i * 11 + 5) % 500);
    p.push_back(ids);
  }
  std::vector<int32_t> plain;
  for (int j = 0; j < 20; ++j) plain.push_back((j * 53 + 7) % 500);
  p.push_back(plain);
  return p;
}

SamplingParams greedy(int max_tokens) {
  SamplingParams sp;
  sp.temperature = 0.0f;
  sp.max_tokens = max_tokens;
  sp.ignore_eos = true;
  return sp;
}

std::vector<std::vector<int32_t>> tokens_of(const std::vector<GenerateResult>& r) {
  std::vector<std::vector<int32_t>> out;
  for (const auto& x : r) out.push_back(x.output.token_ids);
  return out;
}

struct Speculative : ::testing::Test {
  void SetUp() override {
    if (!fs::exists(fs::path(default_tokenizer_dir()) / "tokenizer.json")) GTEST_SKIP() << "models/qwen3 missing";
  }
};

TEST_F(Speculative, GreedyTokensEqualThoseWithoutDrafts) {
  const auto p = prompts();
  const auto want = tokens_of(LLM(config("")).generate(p, greedy(40)));
  LLM llm(config(kSpec));
  const auto got = tokens_of(llm.generate(p, greedy(40)));
  EXPECT_EQ(got, want);
  const EngineStats s = llm.engine().stats();
  EXPECT_TRUE(s.spec_enabled);
  EXPECT_GT(s.spec_num_drafts, 0u);
  EXPECT_GT(s.spec_num_draft_tokens, s.spec_num_drafts);
  EXPECT_GT(s.spec_num_accepted_tokens, 0u);  // greedy loops of the random model repeat themselves
  ASSERT_EQ(s.spec_accepted_per_pos.size(), 4u);
  EXPECT_GE(s.spec_accepted_per_pos[0], s.spec_accepted_per_pos[3]);
  uint64_t kept = 0;
  for (uint64_t n : s.spec_accepted_per_pos) kept += n;
  EXPECT_EQ(kept, s.spec_num_accepted_tokens);
  // Fewer steps than tokens: generation_tokens counts every kept token.
  EXPECT_EQ(s.generation_tokens_total, 5u * 40u);
  std::printf("drafts %llu, draft tokens %llu, accepted %llu\n", (unsigned long long)s.spec_num_drafts,
              (unsigned long long)s.spec_num_draft_tokens, (unsigned long long)s.spec_num_accepted_tokens);
}

TEST_F(Speculative, LimitsStopsLogprobsAndRequestsWithoutDrafts) {
  const auto p = prompts();
  LLM base(config(""));
  LLM spec(config(kSpec));
  // Per prompt: a short max_tokens; a stop token taken from the greedy output; min_tokens with that stop
  // token as EOS-like; logprobs; a repetition penalty (no drafts for it).
  const auto full = tokens_of(base.generate(p, greedy(40)));
  std::vector<std::vector<int32_t>> all;
  std::vector<SamplingParams> sps;
  for (size_t i = 0; i < p.size(); ++i) {
    SamplingParams a = greedy(7);
    SamplingParams b = greedy(40);
    b.stop_token_ids = {full[i][12]};
    SamplingParams c = greedy(30);
    c.stop_token_ids = {full[i][3]};
    c.min_tokens = 10;
    SamplingParams d = greedy(25);
    d.logprobs = 2;
    SamplingParams e = greedy(20);
    e.repetition_penalty = 1.3f;
    for (const SamplingParams& x : {a, b, c, d, e}) {
      all.push_back(p[i]);
      sps.push_back(x);
    }
  }
  const auto want = base.generate(all, sps);
  const auto got = spec.generate(all, sps);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].output.token_ids, want[i].output.token_ids) << i;
    EXPECT_EQ(got[i].output.finish_reason, want[i].output.finish_reason) << i;
    EXPECT_EQ(got[i].output.logprobs.size(), want[i].output.logprobs.size()) << i;
    for (size_t t = 0; t < got[i].output.logprobs.size() && t < want[i].output.logprobs.size(); ++t) {
      EXPECT_EQ(got[i].output.logprobs[t].token_id, want[i].output.logprobs[t].token_id) << i << " " << t;
      EXPECT_NEAR(got[i].output.logprobs[t].logprob, want[i].output.logprobs[t].logprob, 1e-4) << i << " " << t;
      EXPECT_EQ(got[i].output.logprobs[t].top.size(), 2u);
    }
  }
  EXPECT_GT(spec.engine().stats().spec_num_accepted_tokens, 0u);
}

// Random sampling with drafts: each kept token is the target's own sample, so seeded requests run, keep
// their lengths and stay in the vocabulary; the same seed twice gives the same tokens.
TEST_F(Speculative, SeededSamplingIsReproducible) {
  const auto p = prompts();
  SamplingParams sp;
  sp.temperature = 0.8f;
  sp.top_k = 20;
  sp.max_tokens = 30;
  sp.ignore_eos = true;
  sp.seed = 7;
  LLM spec(config(kSpec));
  const auto a = tokens_of(spec.generate(p, sp));
  const auto b = tokens_of(spec.generate(p, sp));
  EXPECT_EQ(a, b);
  for (const auto& t : a) {
    EXPECT_EQ(t.size(), 30u);
    for (int32_t id : t) EXPECT_TRUE(id >= 0 && id < 512);
  }
}

// A KV cache too small for every request at once: preemption (recompute) and the prefix cache meet drafts;
// the greedy tokens stay those without drafts.
TEST_F(Speculative, PreemptionAndPrefixCacheKeepTheTokens) {
  const auto p = prompts();
  auto small = [](const std::string& spec) {
    EngineConfig c = config(spec);
    c.max_model_len = 96;
    c.kv_cache_memory_bytes = size_t{11} * 16 * 1024;  // 10 blocks of 16 tokens (2 layers x K, V x 2 x 32 x fp32)
    return c;
  };
  const auto want = tokens_of(LLM(config("")).generate(p, greedy(40)));
  LLM spec(small(kSpec));
  EXPECT_EQ(tokens_of(spec.generate(p, greedy(40))), want);
  EXPECT_EQ(tokens_of(spec.generate(p, greedy(40))), want);  // again, from the prefix cache
  const EngineStats s = spec.engine().stats();
  EXPECT_GT(s.num_preemptions_total, 0u);
  EXPECT_GT(s.prefix_cache_hits, 0u);
  EXPECT_GT(s.spec_num_accepted_tokens, 0u);
}

TEST_F(Speculative, RefusedWhereItCannotRun) {
  EXPECT_THROW(LLM{config(R"({"method": "eagle", "num_speculative_tokens": 2})")}, Error);
  EngineConfig c = config(kSpec);
  c.runner = "pooling";
  EXPECT_THROW(LLM{c}, Error);
}

}  // namespace
}  // namespace vireo
