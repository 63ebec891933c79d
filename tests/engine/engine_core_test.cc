// EngineCore end to end over the fake model (whose logits depend on the whole context it
// reads back from its paged KV cache): batching, chunking, preemption, prefix caching, aborts,
// sampling, stop strings and logprobs against a direct oracle.
#include "engine/engine_core.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "fakes.h"
#include "engine/llm.h"

namespace vireo {
namespace {

using testing::FakeModel;
using testing::FakeModelStats;
using testing::FakeTokenizer;
using testing::fake_greedy;
using testing::fake_logits;
using testing::kFakeEos;
using testing::kFakeVocab;

struct CoreOpts {
  int num_blocks = 2048;
  int block_size = 4;
  int max_num_seqs = 64;
  int max_num_batched_tokens = 256;
  bool prefix_caching = true;
  int fail_on_forward = -1;
};

struct Harness {
  FakeTokenizer tok;
  FakeModelStats stats;
  std::unique_ptr<EngineCore> core;
  explicit Harness(const CoreOpts& o = {}) {
    EngineCoreConfig cfg;
    cfg.seed = 5;
    cfg.scheduler.max_num_seqs = o.max_num_seqs;
    cfg.scheduler.max_num_batched_tokens = o.max_num_batched_tokens;
    cfg.scheduler.max_model_len = 512;
    cfg.scheduler.block_size = o.block_size;
    cfg.scheduler.num_blocks = o.num_blocks;
    cfg.scheduler.enable_prefix_caching = o.prefix_caching;
    cfg.scheduler.eos_token_ids = {kFakeEos};
    core = std::make_unique<EngineCore>(std::make_unique<FakeModel>(&stats, o.fail_on_forward), &tok, cfg);
  }
  void add(const std::string& id, std::vector<int32_t> prompt, const SamplingParams& sp) {
    core->add_request(std::make_shared<Request>(id, std::move(prompt), sp, monotonic_seconds()));
  }
  // Steps until idle; returns aggregated outputs and counts deltas.
  std::map<std::string, RequestOutput> run(std::map<std::string, int>* num_deltas = nullptr) {
    std::map<std::string, RequestOutput> agg;
    int guard = 0;
    while (core->has_unfinished()) {
      for (auto& o : core->step()) {
        if (num_deltas) ++(*num_deltas)[o.request_id];
        accumulate_output(agg[o.request_id], std::move(o));
      }
      if (++guard > 100000) throw std::runtime_error("engine does not finish");
    }
    return agg;
  }
  void expect_all_free() {
    EXPECT_EQ(core->scheduler().num_running(), 0);
    EXPECT_EQ(core->scheduler().num_waiting(), 0);
    EXPECT_EQ(core->scheduler().kv().num_free_blocks(), core->scheduler().kv().num_total_blocks());
  }
};

std::vector<std::vector<int32_t>> random_prompts(int n, int min_len, int max_len, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<int32_t>> ps;
  for (int i = 0; i < n; ++i) {
    int len = min_len + static_cast<int>(rng() % (max_len - min_len + 1));
    std::vector<int32_t> p;
    for (int j = 0; j < len; ++j) p.push_back(static_cast<int32_t>(rng() % 62));
    ps.push_back(p);
  }
  return ps;
}

SamplingParams greedy(int max_tokens, bool ignore_eos = true) {
  SamplingParams sp;
  sp.temperature = 0.0f;
  sp.max_tokens = max_tokens;
  sp.ignore_eos = ignore_eos;
  return sp;
}

std::string rid(int i) { return "r" + std::to_string(i); }

TEST(EngineCore, SoloGreedyMatchesOracle) {
  Harness h;
  std::vector<int32_t> prompt{1, 2, 3, 4, 5, 6, 7};
  h.add("a", prompt, greedy(20));
  std::map<std::string, int> deltas;
  auto out = h.run(&deltas);
  EXPECT_EQ(out["a"].token_ids, fake_greedy(prompt, 20));
  EXPECT_EQ(out["a"].finish_reason, "length");
  EXPECT_EQ(deltas["a"], 20);  // one delta per token
  EXPECT_EQ(out["a"].num_output_tokens, 20);
  EXPECT_EQ(out["a"].num_prompt_tokens, 7);
  std::string text;
  for (int32_t t : out["a"].token_ids)
    if (t != kFakeEos) text += FakeTokenizer::piece(t);  // special: skipped in text
  EXPECT_EQ(out["a"].text, text);
  h.expect_all_free();
}

TEST(EngineCore, SixtyFourConcurrentGreedyMatchSolo) {
  auto prompts = random_prompts(64, 1, 40, 11);
  // Each alone.
  std::vector<std::vector<int32_t>> solo;
  for (auto& p : prompts) {
    Harness h;
    h.add("x", p, greedy(16));
    solo.push_back(h.run()["x"].token_ids);
    EXPECT_EQ(solo.back(), fake_greedy(p, 16));
  }
  Harness h;
  for (int i = 0; i < 64; ++i) h.add(rid(i), prompts[i], greedy(16));
  auto out = h.run();
  for (int i = 0; i < 64; ++i) EXPECT_EQ(out[rid(i)].token_ids, solo[i]) << i;
  EXPECT_GT(h.stats.max_seqs_per_step.load(), 32);  // really batched
  EXPECT_LE(h.stats.max_tokens_per_step.load(), 256);
  EXPECT_EQ(h.core->scheduler().num_preemptions(), 0u);
  h.expect_all_free();
}

TEST(EngineCore, SmallKvCacheForcesPreemptionAndOutputsStayIdentical) {
  auto prompts = random_prompts(64, 5, 30, 12);
  for (bool caching : {true, false}) {
    CoreOpts o;
    o.num_blocks = 60;  // 59 blocks of 4 tokens: far less than 64 requests need
    o.prefix_caching = caching;
    Harness h(o);
    for (int i = 0; i < 64; ++i) h.add(rid(i), prompts[i], greedy(24));
    auto out = h.run();
    EXPECT_GT(h.core->scheduler().num_preemptions(), 0u);
    for (int i = 0; i < 64; ++i) EXPECT_EQ(out[rid(i)].token_ids, fake_greedy(prompts[i], 24)) << i;
    h.expect_all_free();
  }
}

TEST(EngineCore, ChunkedPrefillWithTinyBudgetMatches) {
  CoreOpts o;
  o.max_num_batched_tokens = 7;
  Harness h(o);
  auto prompts = random_prompts(8, 10, 50, 13);
  for (int i = 0; i < 8; ++i) h.add(rid(i), prompts[i], greedy(10));
  auto out = h.run();
  EXPECT_LE(h.stats.max_tokens_per_step.load(), 7);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(out[rid(i)].token_ids, fake_greedy(prompts[i], 10)) << i;
  h.expect_all_free();
}

TEST(EngineCore, AbortHalfMidGeneration) {
  Harness h;
  auto prompts = random_prompts(20, 3, 20, 14);
  for (int i = 0; i < 20; ++i) h.add(rid(i), prompts[i], greedy(30));
  std::map<std::string, RequestOutput> agg;
  for (int s = 0; s < 5; ++s)
    for (auto& o : h.core->step()) accumulate_output(agg[o.request_id], std::move(o));
  for (int i = 0; i < 20; i += 2) h.core->abort_request(rid(i));
  h.core->abort_request("unknown");  // ignored
  while (h.core->has_unfinished())
    for (auto& o : h.core->step()) accumulate_output(agg[o.request_id], std::move(o));
  for (int i = 0; i < 20; ++i) {
    const auto& o = agg[rid(i)];
    EXPECT_TRUE(o.finished);
    if (i % 2 == 0) {
      EXPECT_EQ(o.finish_reason, "abort");
      EXPECT_LT(o.token_ids.size(), 30u);
    } else {
      EXPECT_EQ(o.finish_reason, "length");
      EXPECT_EQ(o.token_ids, fake_greedy(prompts[i], 30));
    }
  }
  EngineStats st;
  h.core->fill_stats(st);
  EXPECT_EQ(st.num_requests_running, 0);
  EXPECT_EQ(st.request_success_total, 10u);
  h.expect_all_free();
}

TEST(EngineCore, PrefixCachingOnOffSameOutputsAndHits) {
  auto tails = random_prompts(10, 1, 9, 15);
  std::vector<int32_t> shared = random_prompts(1, 40, 40, 16)[0];
  std::map<bool, std::map<std::string, RequestOutput>> results;
  for (bool caching : {true, false}) {
    CoreOpts o;
    o.prefix_caching = caching;
    Harness h(o);
    // The first request runs its prefill before the others arrive.
    auto p0 = shared;
    p0.insert(p0.end(), tails[0].begin(), tails[0].end());
    h.add(rid(0), p0, greedy(8));
    for (auto& o : h.core->step()) accumulate_output(results[caching][o.request_id], std::move(o));
    for (int i = 1; i < 10; ++i) {
      auto p = shared;
      p.insert(p.end(), tails[i].begin(), tails[i].end());
      h.add(rid(i), p, greedy(8));
    }
    for (auto& [id, o] : h.run()) {
      RequestOutput& agg = results[caching][id];
      accumulate_output(agg, std::move(o));
    }
    EngineStats st;
    h.core->fill_stats(st);
    if (caching) {
      EXPECT_GE(st.prefix_cache_hits, 9u * 40u);  // 10 full blocks of the shared prefix each
      EXPECT_EQ(results[caching][rid(3)].num_cached_tokens, 40);
    } else {
      EXPECT_EQ(st.prefix_cache_hits, 0u);
    }
    EXPECT_GT(st.prefix_cache_queries, 0u);
    h.expect_all_free();
  }
  for (int i = 0; i < 10; ++i) {
    auto p = shared;
    p.insert(p.end(), tails[i].begin(), tails[i].end());
    EXPECT_EQ(results[true][rid(i)].token_ids, results[false][rid(i)].token_ids);
    EXPECT_EQ(results[true][rid(i)].token_ids, fake_greedy(p, 8));
  }
}

TEST(EngineCore, SeededSamplingIndependentOfBatch) {
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.seed = 42;
  sp.max_tokens = 20;
  sp.ignore_eos = true;
  std::vector<int32_t> prompt{3, 1, 4, 1, 5};
  Harness alone;
  alone.add("s", prompt, sp);
  auto a = alone.run()["s"].token_ids;
  Harness mixed;
  SamplingParams other = sp;
  other.seed.reset();
  auto others = random_prompts(10, 2, 10, 17);
  for (int i = 0; i < 5; ++i) mixed.add(rid(i), others[i], other);
  mixed.add("s", prompt, sp);
  for (int i = 5; i < 10; ++i) mixed.add(rid(i), others[i], other);
  auto b = mixed.run()["s"].token_ids;
  EXPECT_EQ(a, b);
  EXPECT_NE(a, fake_greedy(prompt, 20));  // really sampled
  sp.seed = 43;
  Harness other_seed;
  other_seed.add("s", prompt, sp);
  EXPECT_NE(other_seed.run()["s"].token_ids, a);
}

TEST(EngineCore, EosStopsAndIsNotInText) {
  // Find a prompt whose greedy continuation hits EOS early.
  std::vector<int32_t> prompt;
  std::vector<int32_t> cont;
  for (int s = 0; s < 5000 && prompt.empty(); ++s) {
    auto p = random_prompts(1, 3, 6, 1000 + s)[0];
    auto c = fake_greedy(p, 12);
    auto it = std::find(c.begin(), c.end(), kFakeEos);
    if (it != c.end() && it != c.begin()) {
      prompt = p;
      cont.assign(c.begin(), it + 1);
    }
  }
  ASSERT_FALSE(prompt.empty());
  Harness h;
  h.add("e", prompt, greedy(12, /*ignore_eos=*/false));
  auto o = h.run()["e"];
  EXPECT_EQ(o.token_ids, cont);
  EXPECT_EQ(o.finish_reason, "stop");
  EXPECT_FALSE(o.stop_token_id.has_value());
  EXPECT_EQ(o.text.find("<eos>"), std::string::npos);
  EXPECT_EQ(o.text.size(), cont.size() - 1);
  h.expect_all_free();
}

TEST(EngineCore, StopStringCutsAndHoldsBackWhileStreaming) {
  std::vector<int32_t> prompt{7, 7, 7};
  auto cont = fake_greedy(prompt, 30);
  std::string full;
  for (int32_t t : cont) full += FakeTokenizer::piece(t);
  // A 3-character stop string starting at character 10.
  std::string stop = full.substr(10, 3);
  size_t first = full.find(stop);
  for (bool include : {false, true}) {
    Harness h;
    SamplingParams sp = greedy(30);
    sp.stop = {stop};
    sp.include_stop_str_in_output = include;
    h.add("s", prompt, sp);
    std::string streamed;
    RequestOutput agg;
    while (h.core->has_unfinished()) {
      for (auto& o : h.core->step()) {
        streamed += o.text;
        // Nothing streamed before the end may contain a prefix of the stop that completes later.
        if (!o.finished) EXPECT_EQ(streamed, full.substr(0, streamed.size()));
        accumulate_output(agg, std::move(o));
      }
    }
    EXPECT_EQ(agg.finish_reason, "stop");
    ASSERT_TRUE(agg.stop_string.has_value());
    EXPECT_EQ(*agg.stop_string, stop);
    EXPECT_EQ(agg.text, include ? full.substr(0, first + 3) : full.substr(0, first));
    EXPECT_EQ(streamed, agg.text);
    EXPECT_EQ(agg.token_ids.size(), first + 3);  // generation stopped at the token completing it
    h.expect_all_free();
  }
}

TEST(EngineCore, StopTokenIdsReported) {
  std::vector<int32_t> prompt{9, 8};
  auto cont = fake_greedy(prompt, 10);
  Harness h;
  SamplingParams sp = greedy(10);
  sp.stop_token_ids = {cont[4]};
  h.add("s", prompt, sp);
  auto o = h.run()["s"];
  auto it = std::find(cont.begin(), cont.end(), cont[4]);
  EXPECT_EQ(o.token_ids, std::vector<int32_t>(cont.begin(), it + 1));
  EXPECT_EQ(o.finish_reason, "stop");
  EXPECT_EQ(o.stop_token_id, cont[4]);
}

TEST(EngineCore, LogprobsAndPromptLogprobsMatchOracle) {
  std::vector<int32_t> prompt{1, 2, 3, 4, 5, 6, 7, 8, 9};
  for (bool caching : {true, false}) {
    CoreOpts o;
    o.prefix_caching = caching;
    o.max_num_batched_tokens = 4;  // prompt logprobs across chunks
    Harness h(o);
    h.add("warm", prompt, greedy(1));  // would give prefix hits to the next one
    h.run();
    SamplingParams sp = greedy(5);
    sp.logprobs = 3;
    sp.prompt_logprobs = 2;
    h.add("l", prompt, sp);
    auto out = h.run()["l"];
    auto cont = fake_greedy(prompt, 5);
    ASSERT_EQ(out.logprobs.size(), 5u);
    std::vector<int32_t> ctx = prompt;
    float lg[kFakeVocab];
    auto logsoftmax = [&](int v) {
      double z = 0;
      for (float x : lg) z += std::exp(static_cast<double>(x));
      return lg[v] - std::log(z);
    };
    for (int i = 0; i < 5; ++i) {
      fake_logits(ctx, lg);
      EXPECT_EQ(out.logprobs[i].token_id, cont[i]);
      EXPECT_NEAR(out.logprobs[i].logprob, logsoftmax(cont[i]), 1e-4);
      ASSERT_EQ(out.logprobs[i].top.size(), 3u);
      EXPECT_EQ(out.logprobs[i].top[0].first, cont[i]);  // greedy: the best is the chosen one
      ctx.push_back(cont[i]);
    }
    ASSERT_EQ(out.prompt_logprobs.size(), prompt.size());
    EXPECT_FALSE(out.prompt_logprobs[0].has_value());
    for (size_t p = 1; p < prompt.size(); ++p) {
      ASSERT_TRUE(out.prompt_logprobs[p].has_value()) << p;
      std::vector<int32_t> c(prompt.begin(), prompt.begin() + p);
      fake_logits(c, lg);
      EXPECT_EQ(out.prompt_logprobs[p]->token_id, prompt[p]);
      EXPECT_NEAR(out.prompt_logprobs[p]->logprob, logsoftmax(prompt[p]), 1e-4);
      EXPECT_EQ(out.prompt_logprobs[p]->top.size(), 2u);
      // vLLM's rank, also for prompt tokens far down the row: ids at least as likely.
      EXPECT_EQ(out.prompt_logprobs[p]->rank, std::count_if(lg, lg + kFakeVocab, [&](float x) { return x >= lg[prompt[p]]; }));
    }
    EXPECT_EQ(out.num_cached_tokens, 0);  // prompt logprobs bypass the prefix cache
  }
}

TEST(EngineCore, ModelErrorFinishesStepRequestsAndEngineContinues) {
  CoreOpts o;
  o.fail_on_forward = 0;
  Harness h(o);
  h.add("a", {1, 2, 3}, greedy(4));
  auto out = h.run();
  EXPECT_EQ(out["a"].finish_reason, "error");
  EXPECT_NE(out["a"].error.find("fake model failure"), std::string::npos);
  h.expect_all_free();
  h.add("b", {1, 2, 3}, greedy(4));
  out = h.run();
  EXPECT_EQ(out["b"].finish_reason, "length");
  EXPECT_EQ(out["b"].token_ids, fake_greedy({1, 2, 3}, 4));
}

TEST(EngineCore, MetricsCountTokensAndLatencies) {
  Harness h;
  h.add("a", {1, 2, 3}, greedy(5));
  h.add("b", {4, 5}, greedy(3));
  h.run();
  EngineStats st;
  h.core->fill_stats(st);
  EXPECT_EQ(st.prompt_tokens_total, 5u);
  EXPECT_EQ(st.generation_tokens_total, 8u);
  EXPECT_EQ(st.request_success_total, 2u);
  EXPECT_EQ(st.time_to_first_token_seconds.count, 2u);
  EXPECT_EQ(st.inter_token_latency_seconds.count, 6u);
  EXPECT_EQ(st.e2e_request_latency_seconds.count, 2u);
  EXPECT_EQ(st.time_to_first_token_seconds.bounds.front(), 0.001);
  EXPECT_DOUBLE_EQ(st.kv_cache_usage, 0.0);
}

}  // namespace
}  // namespace vireo
