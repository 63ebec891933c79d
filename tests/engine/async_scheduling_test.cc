// Async scheduling (EngineCoreConfig::async_scheduling) against the synchronous engine, on the built-in
// default model on the CPU backend (a real DecoderModel: continuations take their input tokens from the
// previous step's samples on the "device"): same tokens, same logprobs, same finish reasons, every KV
// block back at the end, with stops, min_tokens, seeds, aborts and arrivals mid-generation.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/engine_core.h"
#include "engine/llm.h"
#include "deferred_copy_backend.h"
#include "fakes.h"
#include "model/default_model.h"

namespace vireo {
namespace {

struct EngineRun {
  std::map<std::string, RequestOutput> outputs;
  int num_steps = 0;
  uint64_t launched_ahead = 0;
};

struct Job {
  std::string id;
  std::vector<int32_t> prompt;
  SamplingParams params;
  int arrive_at_step = 0;  // added before this step() call
  int abort_at_step = -1;
};

// deferred: downloads of sampled tokens land only when the engine waits for them (DeferredCopyBackend),
// as late as a GPU's copy stream may run them.
EngineRun run_engine(bool async, const std::vector<Job>& jobs, int max_num_seqs = 4, bool deferred = false) {
  const ModelConfig mc = default_model_config();
  LoadOptions lo;
  lo.load_format = "dummy";
  lo.seed = 3;
  std::unique_ptr<Backend> be = create_backend("cpu");
  if (deferred) be = std::make_unique<testing::DeferredCopyBackend>(std::move(be));
  auto model = load_model(mc, "", std::move(be), lo);
  EngineCoreConfig cfg;
  cfg.seed = 11;
  cfg.async_scheduling = async;
  cfg.scheduler.max_num_seqs = max_num_seqs;  // <= 4: decode rows on the CPU GEMV, which does not depend on the batch
  cfg.scheduler.max_num_batched_tokens = 64;
  cfg.scheduler.max_model_len = 256;
  cfg.scheduler.block_size = 4;
  cfg.scheduler.num_blocks = 512;
  cfg.scheduler.eos_token_ids = {2};
  testing::FakeTokenizer tok;  // outputs are compared as token ids (detokenize off)
  EngineCore core(std::move(model), &tok, cfg);
  EngineRun r;
  for (int step = 0; step < 10000; ++step) {
    for (const Job& j : jobs)
      if (j.arrive_at_step == step) {
        SamplingParams p = j.params;
        p.detokenize = false;
        core.add_request(std::make_shared<Request>(j.id, j.prompt, p, 0.0));
      }
    for (const Job& j : jobs)
      if (j.abort_at_step == step) core.abort_request(j.id);
    if (!core.has_unfinished()) {
      bool more = false;
      for (const Job& j : jobs) more |= j.arrive_at_step > step;
      if (!more) break;
      continue;
    }
    for (auto& o : core.step()) accumulate_output(r.outputs[o.request_id], std::move(o));
    ++r.num_steps;
  }
  EXPECT_FALSE(core.has_unfinished());
  r.launched_ahead = core.num_steps_launched_ahead();
  EXPECT_EQ(core.scheduler().kv().num_free_blocks(), core.scheduler().kv().num_total_blocks());
  return r;
}

std::vector<int32_t> prompt(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(static_cast<int32_t>(3 + rng() % 200));
  return p;
}

void expect_same(const EngineRun& a, const EngineRun& b) {
  ASSERT_EQ(a.outputs.size(), b.outputs.size());
  for (const auto& [id, x] : a.outputs) {
    const RequestOutput& y = b.outputs.at(id);
    EXPECT_EQ(x.token_ids, y.token_ids) << id;
    EXPECT_EQ(x.finish_reason, y.finish_reason) << id;
    ASSERT_EQ(x.logprobs.size(), y.logprobs.size()) << id;
    for (size_t i = 0; i < x.logprobs.size(); ++i) EXPECT_EQ(x.logprobs[i].logprob, y.logprobs[i].logprob) << id;
  }
}

TEST(AsyncScheduling, GreedyBatchMatchesSynchronous) {
  std::vector<Job> jobs;
  for (int i = 0; i < 4; ++i) {
    Job j{"r" + std::to_string(i), prompt(5 + 3 * i, i), {}, 0, -1};
    j.params.temperature = 0;
    j.params.max_tokens = 6 + 5 * i;  // different lengths: the batch shrinks while steps run ahead
    j.params.ignore_eos = true;
    j.params.logprobs = 2;
    jobs.push_back(j);
  }
  const EngineRun sync = run_engine(false, jobs), async = run_engine(true, jobs);
  expect_same(sync, async);
  EXPECT_EQ(async.outputs.at("r3").token_ids.size(), 21u);
  EXPECT_EQ(sync.launched_ahead, 0u);
  EXPECT_GE(async.launched_ahead, 15u);  // most decode steps ran ahead
}

// The same with downloads that complete only when waited for: no step's sampling may overwrite an
// output buffer whose download is still outstanding (the CUDA backend downloads on a side stream).
TEST(AsyncScheduling, LateDownloadsGiveTheSameTokens) {
  std::vector<Job> jobs;
  for (int i = 0; i < 3; ++i) {
    Job j{"d" + std::to_string(i), prompt(6 + 2 * i, 80 + i), {}, 0, -1};
    j.params.temperature = i == 2 ? 0.8f : 0.0f;
    j.params.seed = 77;
    j.params.max_tokens = 9 + 4 * i;
    j.params.ignore_eos = true;
    j.params.logprobs = 1;
    jobs.push_back(j);
  }
  const EngineRun sync = run_engine(false, jobs), async = run_engine(true, jobs, 4, true);
  expect_same(sync, async);
  EXPECT_GE(async.launched_ahead, 10u);
}

// vLLM's bad words: a two-token word's ban depends on the token still in flight, so those rows are
// sampled once it is processed (as grammar rows); a one-token word's does not. Same tokens as the
// synchronous engine (seeded draws), and neither word appears.
TEST(AsyncScheduling, BadWordsMatchSynchronous) {
  std::vector<Job> jobs;
  for (int i = 0; i < 3; ++i) {
    Job j{"b" + std::to_string(i), prompt(6 + 2 * i, 40 + i), {}, 0, -1};
    j.params.temperature = 1.0f;  // seeded draws: greedy on dummy weights repeats one token
    j.params.seed = 5 + i;
    j.params.max_tokens = 12;
    j.params.ignore_eos = true;
    jobs.push_back(j);
  }
  const EngineRun plain = run_engine(false, jobs);
  for (Job& j : jobs) {
    const std::vector<int32_t>& t = plain.outputs.at(j.id).token_ids;
    j.params.bad_words_token_ids = {{t[5], t[6]}};  // the greedy path reaches this pair, so the ban bites
    if (j.id == "b1") j.params.bad_words_token_ids.push_back({t[2]});
  }
  const EngineRun sync = run_engine(false, jobs), async = run_engine(true, jobs);
  expect_same(sync, async);
  EXPECT_GE(async.launched_ahead, 5u);
  for (const Job& j : jobs) {
    const std::vector<int32_t>& o = sync.outputs.at(j.id).token_ids;
    const auto& w = j.params.bad_words_token_ids;
    EXPECT_NE(o, plain.outputs.at(j.id).token_ids) << j.id;
    for (size_t i = 0; i < o.size(); ++i) {
      if (i > 0) EXPECT_FALSE(o[i - 1] == w[0][0] && o[i] == w[0][1]) << j.id << " at " << i;
      if (w.size() > 1) EXPECT_NE(o[i], w[1][0]) << j.id << " at " << i;
    }
  }
}

// More requests than --max-num-seqs: the waiting ones cannot be admitted while the running ones decode,
// so steps still run ahead; each admission waits for the step in flight.
TEST(AsyncScheduling, SaturatedBatchRunsAheadWhileRequestsWait) {
  std::vector<Job> jobs;
  for (int i = 0; i < 5; ++i) {
    Job j{"w" + std::to_string(i), prompt(4 + i, 60 + i), {}, 0, -1};
    j.params.temperature = 0;
    j.params.max_tokens = 8 + 3 * i;
    j.params.ignore_eos = true;
    jobs.push_back(j);
  }
  const EngineRun sync = run_engine(false, jobs, 2), async = run_engine(true, jobs, 2);
  for (const Job& j : jobs) {
    EXPECT_EQ(sync.outputs.at(j.id).token_ids, async.outputs.at(j.id).token_ids) << j.id;
    EXPECT_EQ(async.outputs.at(j.id).token_ids.size(), static_cast<size_t>(j.params.max_tokens)) << j.id;
  }
  EXPECT_GE(async.launched_ahead, 20u);
}

// Steps with prefill chunks run ahead too (Scheduler::schedule_continuation): long prompts chunked by the
// 64-token budget beside decoding requests, admissions into the seats of requests that stop by length,
// prompt logprobs, seeded draws. The schedules are the synchronous engine's, so are the tokens and logprobs;
// with late downloads as well.
TEST(AsyncScheduling, MixedStepsRunAheadAndMatchSynchronous) {
  std::vector<Job> jobs;
  for (int i = 0; i < 7; ++i) {
    Job j{"m" + std::to_string(i), prompt(20 + 17 * i, 200 + i), {}, 0, -1};
    j.params.temperature = i % 3 == 2 ? 0.7f : 0.0f;
    j.params.seed = 900 + i;
    j.params.max_tokens = 4 + 3 * i;
    j.params.ignore_eos = true;
    j.params.logprobs = 1;
    if (i == 4) j.params.prompt_logprobs = 2;
    jobs.push_back(j);
  }
  const EngineRun sync = run_engine(false, jobs);
  for (bool deferred : {false, true}) {
    const EngineRun async = run_engine(true, jobs, 4, deferred);
    expect_same(sync, async);
    for (const Job& j : jobs)
      EXPECT_EQ(async.outputs.at(j.id).token_ids.size(), static_cast<size_t>(j.params.max_tokens)) << j.id;
    EXPECT_EQ(async.outputs.at("m4").prompt_logprobs.size(), sync.outputs.at("m4").prompt_logprobs.size());
    EXPECT_EQ(async.num_steps, sync.num_steps);
    EXPECT_GE(async.launched_ahead + 3, static_cast<uint64_t>(async.num_steps));  // nearly every step ran ahead
  }
}

TEST(AsyncScheduling, StopsSeedsMinTokensArrivalsAndAborts) {
  std::vector<Job> jobs;
  // A stop token that the greedy run of r0 produces: found from a first synchronous run.
  Job probe{"p", prompt(9, 40), {}, 0, -1};
  probe.params.temperature = 0;
  probe.params.max_tokens = 12;
  probe.params.ignore_eos = true;
  const EngineRun first = run_engine(false, {probe});
  const std::vector<int32_t>& toks = first.outputs.at("p").token_ids;
  ASSERT_GE(toks.size(), 8u);

  Job a = probe;
  a.id = "stop";
  a.params.stop_token_ids = {toks[5]};  // stops at step 6 or earlier: the run-ahead row is dropped
  a.params.max_tokens = 30;
  jobs.push_back(a);
  Job b = probe;
  b.id = "min";
  b.params.stop_token_ids = {toks[1]};
  b.params.min_tokens = 4;  // the mask counts the token still on its way
  b.params.max_tokens = 20;
  jobs.push_back(b);
  Job c{"seeded", prompt(7, 41), {}, 0, -1};
  c.params.temperature = 0.9f;
  c.params.seed = 1234;
  c.params.max_tokens = 15;
  c.params.ignore_eos = true;
  jobs.push_back(c);
  Job d{"late", prompt(6, 42), {}, 5, -1};  // arrives while the others decode
  d.params.temperature = 0;
  d.params.max_tokens = 10;
  d.params.ignore_eos = true;
  jobs.push_back(d);
  Job e{"aborted", prompt(8, 43), {}, 0, 7};
  e.params.temperature = 0;
  e.params.max_tokens = 40;
  e.params.ignore_eos = true;
  jobs.push_back(e);

  const EngineRun sync = run_engine(false, jobs), async = run_engine(true, jobs);
  for (const char* id : {"stop", "min", "seeded", "late"}) {
    const RequestOutput& x = sync.outputs.at(id);
    const RequestOutput& y = async.outputs.at(id);
    EXPECT_EQ(x.token_ids, y.token_ids) << id;
    EXPECT_EQ(x.finish_reason, y.finish_reason) << id;
  }
  EXPECT_EQ(sync.outputs.at("stop").finish_reason, "stop");
  EXPECT_GE(sync.outputs.at("min").token_ids.size(), 4u);
  // An abort lands between steps in both engines; the async one may have one more token by then.
  EXPECT_EQ(async.outputs.at("aborted").finish_reason, "abort");
  EXPECT_GT(async.launched_ahead, 0u);
}

}  // namespace
}  // namespace vireo
