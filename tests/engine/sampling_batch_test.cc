// build_sampling_batch (what the engine hands the sample op) and the sampling features end to end
// through EngineCore with the fake model (whose logits the test can recompute).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "engine/engine_core.h"
#include "engine/llm.h"
#include "engine/sampling_batch.h"
#include "fakes.h"

namespace vireo {
namespace {

using testing::FakeModel;
using testing::FakeTokenizer;
using testing::fake_logits;
using testing::kFakeEos;
using testing::kFakeVocab;

std::shared_ptr<Request> make_req(const std::string& id, std::vector<int32_t> prompt, SamplingParams sp) {
  auto r = std::make_shared<Request>(id, std::move(prompt), sp, 0.0);
  return r;
}

TEST(SamplingBatch, RowsPenaltiesMasksAndDraws) {
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  SamplingParams pen;
  pen.temperature = 0.7f;
  pen.top_p = 0.9f;
  pen.top_k = 5;
  pen.min_p = 0.1f;
  pen.repetition_penalty = 1.3f;
  pen.frequency_penalty = 0.5f;
  pen.min_tokens = 3;
  pen.stop_token_ids = {7};
  pen.logprobs = 3;
  SamplingParams echo;
  echo.temperature = 0.0f;
  echo.prompt_logprobs = 2;

  auto a = make_req("a", {1, 2, 3}, greedy);
  auto b = make_req("b", {4, 4, 9}, pen);
  b->append_output_token(9);
  b->append_output_token(5);
  auto c = make_req("c", {10, 11, 12}, echo);
  SchedulerOutput sched;
  sched.scheduled = {{a, 1}, {b, 1}, {c, 3}};
  BuiltStep built;
  built.rows = {{0, -1}, {1, -1}, {2, 0}, {2, 1}, {2, -1}};
  std::mt19937_64 rng(1);
  const std::vector<int32_t> eos{kFakeEos};
  SamplingBatch batch = build_sampling_batch(sched, built, eos, rng);

  ASSERT_EQ(batch.rows.size(), 5u);
  EXPECT_EQ(batch.num_top_logprobs, 3);
  // Greedy: no draw, no penalties.
  EXPECT_LT(batch.rows[0].temperature, 1e-5f);
  EXPECT_EQ(batch.rows[0].uniform, 0.0f);
  EXPECT_EQ(batch.rows[0].penalty_begin, batch.rows[0].penalty_end);
  // Penalised row: distinct ids of prompt + output with output counts, masks while < min_tokens.
  const SamplingRow& r = batch.rows[1];
  EXPECT_FLOAT_EQ(r.repetition_penalty, 1.3f);
  EXPECT_FLOAT_EQ(r.frequency_penalty, 0.5f);
  EXPECT_EQ(r.top_k, 5);
  std::map<int32_t, int32_t> entries;
  for (int e = r.penalty_begin; e < r.penalty_end; ++e)
    entries[batch.penalty_tokens[2 * e]] = batch.penalty_tokens[2 * e + 1];
  EXPECT_EQ(entries, (std::map<int32_t, int32_t>{{4, 0}, {5, 1}, {9, 1}}));
  std::vector<int32_t> masks(batch.mask_tokens.begin() + r.mask_begin, batch.mask_tokens.begin() + r.mask_end);
  EXPECT_EQ(masks, (std::vector<int32_t>{kFakeEos, 7}));
  std::mt19937_64 replay(1);
  EXPECT_FLOAT_EQ(r.uniform, static_cast<float>(std::uniform_real_distribution<double>(0.0, 1.0)(replay)));
  // Prompt-logprob rows force the next prompt token; the sampling row of c is greedy.
  EXPECT_EQ(batch.rows[2].forced_token, 11);
  EXPECT_EQ(batch.rows[3].forced_token, 12);
  EXPECT_EQ(batch.rows[4].forced_token, -1);
}

// The old construction (a fresh sort of prompt + output every step): what the incremental entries
// must equal, entry for entry.
std::vector<int32_t> fresh_penalty_entries(const Request& req) {
  std::vector<std::pair<int32_t, int32_t>> ids;
  for (int32_t t : req.prompt_token_ids) ids.emplace_back(t, 0);
  for (int32_t t : req.output_token_ids) ids.emplace_back(t, 1);
  std::sort(ids.begin(), ids.end());
  std::vector<int32_t> out;
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    int32_t count = 0;
    for (; j < ids.size() && ids[j].first == ids[i].first; ++j) count += ids[j].second;
    out.push_back(ids[i].first);
    out.push_back(count);
    i = j;
  }
  return out;
}

// Penalty entries kept per request across steps (1 or several new tokens per step, repeated and new
// ids, prompt ids re-emitted), a preemption (output kept), and an output reset / rewrite: every step
// gives the same SampleParams inputs as the fresh construction. Rows without penalties build nothing.
TEST(SamplingBatch, IncrementalPenaltyEntriesMatchFreshBuild) {
  std::mt19937 rng(7);
  auto id = [&](int hi) { return std::uniform_int_distribution<int32_t>(0, hi)(rng); };
  SamplingParams pen;
  pen.temperature = 0.8f;
  pen.presence_penalty = 0.5f;
  pen.frequency_penalty = 0.25f;
  SamplingParams rep;
  rep.temperature = 0.0f;
  rep.repetition_penalty = 1.2f;
  SamplingParams plain;
  plain.temperature = 0.7f;
  std::vector<int32_t> p1, p2, p3;
  for (int i = 0; i < 300; ++i) p1.push_back(id(500));
  for (int i = 0; i < 40; ++i) p2.push_back(id(60));
  for (int i = 0; i < 20; ++i) p3.push_back(id(1000));
  auto a = make_req("a", p1, pen);
  auto b = make_req("b", p2, rep);
  auto c = make_req("c", p3, plain);
  SchedulerOutput sched;
  sched.scheduled = {{a, 1}, {c, 1}, {b, 1}};
  BuiltStep built;
  built.rows = {{0, -1}, {1, -1}, {2, -1}};
  const std::vector<int32_t> eos{kFakeEos};
  std::mt19937_64 engine_rng(3);
  auto check_step = [&](int step) {
    SCOPED_TRACE("step " + std::to_string(step));
    SamplingBatch batch = build_sampling_batch(sched, built, eos, engine_rng);
    std::vector<int32_t> want = fresh_penalty_entries(*a);
    const size_t na = want.size();
    std::vector<int32_t> wb = fresh_penalty_entries(*b);
    want.insert(want.end(), wb.begin(), wb.end());
    EXPECT_EQ(batch.penalty_tokens, want);
    EXPECT_EQ(batch.rows[0].penalty_begin, 0);
    EXPECT_EQ(batch.rows[0].penalty_end, static_cast<int32_t>(na / 2));
    EXPECT_EQ(batch.rows[1].penalty_begin, batch.rows[1].penalty_end);  // no penalties: no entries
    EXPECT_EQ(batch.rows[2].penalty_begin, static_cast<int32_t>(na / 2));
    EXPECT_EQ(batch.rows[2].penalty_end, static_cast<int32_t>(want.size() / 2));
    EXPECT_FALSE(c->penalty_entries.built());
  };
  int step = 0;
  check_step(step++);
  for (; step < 60; ++step) {
    // 1..3 tokens per step (a step may append several, e.g. after a skipped one); some from the
    // prompt, some repeated outputs, some new ids.
    for (int k = id(2); k >= 0; --k) {
      const int kind = id(2);
      a->append_output_token(kind == 0 ? p1[id(299)] : kind == 1 ? id(20) : id(5000));
      b->append_output_token(kind == 0 ? p2[id(39)] : id(200));
    }
    c->append_output_token(id(1000));
    if (step == 30) {
      // Preemption (recompute): the KV goes, prompt and output stay.
      a->num_computed_tokens = 0;
      a->status = RequestStatus::kPreempted;
    }
    if (step == 40) {
      // The output reset and regenerated to a longer, different sequence: rebuilt, not appended to.
      a->output_token_ids.clear();
      a->all_token_ids = a->prompt_token_ids;
      for (int i = 0; i < 50; ++i) a->append_output_token(id(700));
    }
    if (step == 45) {
      // Truncated (shorter output than counted).
      b->output_token_ids.resize(b->output_token_ids.size() / 2);
      b->all_token_ids = b->prompt_token_ids;
      b->all_token_ids.insert(b->all_token_ids.end(), b->output_token_ids.begin(), b->output_token_ids.end());
    }
    check_step(step);
  }
}

struct Core {
  FakeTokenizer tok;
  std::unique_ptr<EngineCore> core;
  Core() {
    EngineCoreConfig cfg;
    cfg.scheduler.max_model_len = 512;
    cfg.scheduler.block_size = 4;
    cfg.scheduler.num_blocks = 512;
    cfg.scheduler.eos_token_ids = {kFakeEos};
    core = std::make_unique<EngineCore>(std::make_unique<FakeModel>(), &tok, cfg);
  }
  RequestOutput run(std::vector<int32_t> prompt, const SamplingParams& sp) {
    core->add_request(std::make_shared<Request>("r", std::move(prompt), sp, monotonic_seconds()));
    RequestOutput agg;
    while (core->has_unfinished())
      for (auto& o : core->step()) accumulate_output(agg, std::move(o));
    return agg;
  }
};

TEST(SamplingBatch, RepetitionPenaltyChangesGreedyAsTheReferenceSays) {
  SamplingParams sp;
  sp.temperature = 0.0f;
  sp.repetition_penalty = 2.0f;
  sp.max_tokens = 12;
  sp.ignore_eos = true;
  std::vector<int32_t> prompt{3, 1, 4, 1, 5};
  auto out = Core().run(prompt, sp);
  ASSERT_EQ(out.token_ids.size(), 12u);
  // Recompute each step: penalised argmax over the fake logits of the context so far.
  std::vector<int32_t> ctx = prompt;
  for (int32_t tok : out.token_ids) {
    std::vector<float> l(kFakeVocab);
    fake_logits(ctx, l.data());
    for (int32_t t = 0; t < kFakeVocab; ++t)
      if (std::find(ctx.begin(), ctx.end(), t) != ctx.end()) l[t] = l[t] > 0 ? l[t] / 2.0f : l[t] * 2.0f;
    EXPECT_EQ(tok, std::max_element(l.begin(), l.end()) - l.begin());
    ctx.push_back(tok);
  }
}

TEST(SamplingBatch, MinTokensHoldsOffEos) {
  // A prompt whose greedy next token is EOS.
  std::vector<int32_t> prompt;
  for (int32_t a = 0; a < 60 && prompt.empty(); ++a)
    for (int32_t b = 0; b < 60; ++b) {
      std::vector<float> l(kFakeVocab);
      fake_logits({a, b}, l.data());
      if (std::max_element(l.begin(), l.end()) - l.begin() == kFakeEos) {
        prompt = {a, b};
        break;
      }
    }
  ASSERT_FALSE(prompt.empty());
  SamplingParams sp;
  sp.temperature = 0.0f;
  sp.max_tokens = 8;
  EXPECT_EQ(Core().run(prompt, sp).token_ids.size(), 1u);  // EOS at once
  sp.min_tokens = 4;
  auto out = Core().run(prompt, sp);
  ASSERT_GE(out.token_ids.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_NE(out.token_ids[i], kFakeEos) << i;
}

TEST(SamplingBatch, LogprobsOfSampledTokens) {
  SamplingParams sp;
  sp.temperature = 0.0f;
  sp.max_tokens = 5;
  sp.ignore_eos = true;
  sp.logprobs = 4;
  std::vector<int32_t> prompt{7, 8, 9};
  auto out = Core().run(prompt, sp);
  ASSERT_EQ(out.logprobs.size(), 5u);
  std::vector<int32_t> ctx = prompt;
  for (size_t i = 0; i < out.token_ids.size(); ++i) {
    std::vector<float> l(kFakeVocab);
    fake_logits(ctx, l.data());
    double s = 0;
    const float mx = *std::max_element(l.begin(), l.end());
    for (float v : l) s += std::exp(static_cast<double>(v - mx));
    const float lse = mx + static_cast<float>(std::log(s));
    EXPECT_NEAR(out.logprobs[i].logprob, l[out.token_ids[i]] - lse, 1e-5);
    ASSERT_EQ(out.logprobs[i].top.size(), 4u);
    EXPECT_EQ(out.logprobs[i].top[0].first, out.token_ids[i]);  // greedy: the best is the token
    ctx.push_back(out.token_ids[i]);
  }
}

}  // namespace
}  // namespace vireo
