// Structured outputs in the engine: bitmask rows in the sampling batch, the matcher advanced with
// every output token (finish at the grammar's end, preemption, ignore_eos), async scheduling not
// running a constrained request ahead. The end-to-end cases first check that the CPU sampler applies
// the mask (a failure there names the model/backend side rather than the matcher).
#include <gtest/gtest.h>

#include <functional>
#include <map>

#include "engine/engine_core.h"
#include "engine/llm.h"
#include "engine/sampling_batch.h"
#include "fakes.h"
#include "model/default_model.h"
#include "model/sample_on_backend.h"
#include "structured/json_schema_compiler.h"
#include "structured/structured_output.h"

namespace vireo {
namespace {

using testing::FakeModel;
using testing::FakeModelStats;
using testing::FakeTokenizer;
using testing::kFakeEos;
using testing::kFakeVocab;
using structured::StructuredOutputSpec;

std::shared_ptr<const structured::Grammar> choice(std::vector<std::string> words) {
  return structured::compile_structured_output({StructuredOutputSpec::Kind::kChoice, {}, std::move(words)});
}

std::shared_ptr<const structured::Grammar> schema(const char* text) {
  return std::make_shared<const structured::Grammar>(structured::compile_json_schema(nlohmann::ordered_json::parse(text)));
}

std::shared_ptr<const structured::VocabIndex> fake_vocab() {
  static auto v = [] {
    FakeTokenizer tok;
    std::vector<std::string> bytes(kFakeVocab);
    for (int32_t id = 0; id < kFakeEos; ++id) bytes[id] = FakeTokenizer::piece(id);
    return std::make_shared<const structured::VocabIndex>(bytes);
  }();
  return v;
}

// Whether the CPU sample op honours SamplingBatch::token_bitmask (the model side of the feature).
bool sampling_applies_mask() {
  const int64_t V = 64;
  std::vector<float> logits(V, 0.0f);
  logits[0] = 10.0f;
  SamplingBatch b;
  b.rows.resize(1);
  b.rows[0].temperature = 0.0f;
  b.bitmask_rows = {0};
  b.token_bitmask = {1u << 5, 0u};
  SampledRows out;
  auto cpu = create_backend("cpu");
  SamplingWorkspace ws;
  sample_on_backend(*cpu, Tensor(logits.data(), DType::kF32, {1, V}), b, out, ws);
  free_sampling_workspace(*cpu, ws);
  return out.tokens.at(0) == 5;
}

#define REQUIRE_MASKED_SAMPLING() \
  ASSERT_TRUE(sampling_applies_mask()) << "the sample op ignores SamplingBatch::token_bitmask (src/model, src/backend)"

TEST(StructuredOutput, SamplingBatchHasABitmaskRowPerConstrainedRequest) {
  SamplingParams free_text;
  SamplingParams constrained;
  constrained.grammar = choice({"ab", "ba"});
  auto a = std::make_shared<Request>("a", std::vector<int32_t>{1, 2}, free_text, 0.0);
  auto b = std::make_shared<Request>("b", std::vector<int32_t>{3, 4, 5}, constrained, 0.0);
  b->matcher = std::make_unique<structured::GrammarMatcher>(constrained.grammar, fake_vocab(), std::vector<int32_t>{kFakeEos});
  SchedulerOutput sched;
  sched.scheduled = {{a, 1}, {b, 3}};
  BuiltStep built;
  built.rows = {{0, -1}, {1, 0}, {1, -1}};  // b: a prompt-logprob row, then its sampling row
  std::mt19937_64 rng(1);
  const std::vector<int32_t> eos{kFakeEos};
  const int32_t width = 100;  // wider than the tokenizer: ids 64.. have no token
  SamplingBatch batch = build_sampling_batch(sched, built, eos, rng, 0, width);
  ASSERT_EQ(batch.bitmask_rows, std::vector<int32_t>{2});
  ASSERT_EQ(batch.token_bitmask.size(), 4u);
  EXPECT_EQ(batch.token_bitmask[0], 0b11u);  // 'a' (0) and 'b' (1)
  EXPECT_EQ(batch.token_bitmask[1] | batch.token_bitmask[2] | batch.token_bitmask[3], 0u);
  EXPECT_THROW(build_sampling_batch(sched, built, eos, rng), Error);  // no width, no mask
}

// One decode row per params (prompt {3}, a matcher where a grammar is set, the given outputs so far), the
// sampling batch built over a 100-token vocabulary (4 bitmask words a row).
struct MaskedBatch {
  std::vector<std::shared_ptr<Request>> reqs;
  SchedulerOutput sched;
  BuiltStep built;
  std::mt19937_64 rng{1};
  MaskedBatch(std::initializer_list<const SamplingParams*> params, const std::vector<int32_t>& outputs = {}) {
    for (const SamplingParams* p : params) {
      auto r = std::make_shared<Request>("r" + std::to_string(reqs.size()), std::vector<int32_t>{3}, *p, 0.0);
      if (p->grammar) r->matcher = std::make_unique<structured::GrammarMatcher>(p->grammar, fake_vocab(), std::vector<int32_t>{kFakeEos});
      r->output_token_ids = outputs;
      built.rows.push_back({static_cast<int>(reqs.size()), -1});
      sched.scheduled.push_back({r, 1});
      reqs.push_back(r);
    }
  }
  SamplingBatch build() { return build_sampling_batch(sched, built, std::vector<int32_t>{kFakeEos}, rng, 0, 100); }
};

// vLLM's allowed_token_ids: a bitmask row of exactly the listed ids; with a grammar, the two masks
// ANDed; when they share no token the request fails as its own fault (its row allows only EOS, and the
// scheduler finishes it with the error: a 400 at the server).
TEST(StructuredOutput, AllowedTokenIdsMaskAloneAndWithAGrammar) {
  SamplingParams listed;
  listed.allowed_token_ids = {1, 33, 70};
  SamplingParams both;
  both.grammar = choice({"ab", "ba"});
  both.allowed_token_ids = {1, 40};  // 'b' (1) is in the grammar's first set, 40 is not
  SamplingParams disjoint = both;
  disjoint.allowed_token_ids = {40};
  MaskedBatch mb({&listed, &both, &disjoint});
  SamplingBatch batch = mb.build();
  ASSERT_EQ(batch.bitmask_rows, (std::vector<int32_t>{0, 1, 2}));
  ASSERT_EQ(batch.token_bitmask.size(), 12u);
  const std::vector<uint32_t> listed_row = {0b10u, 1u << 1, 1u << 6, 0u};  // 1, 33, 70
  EXPECT_EQ(std::vector<uint32_t>(batch.token_bitmask.begin(), batch.token_bitmask.begin() + 4), listed_row);
  EXPECT_EQ(std::vector<uint32_t>(batch.token_bitmask.begin() + 4, batch.token_bitmask.begin() + 8),
            (std::vector<uint32_t>{0b10u, 0u, 0u, 0u}));  // grammar {0, 1} AND {1, 40}
  std::vector<uint32_t> eos_row(4, 0u);
  eos_row[kFakeEos >> 5] = 1u << (kFakeEos & 31);
  EXPECT_EQ(std::vector<uint32_t>(batch.token_bitmask.begin() + 8, batch.token_bitmask.end()), eos_row);
  EXPECT_NE(mb.reqs[2]->grammar_error.find("allowed_token_ids"), std::string::npos) << mb.reqs[2]->grammar_error;
  EXPECT_TRUE(mb.reqs[0]->grammar_error.empty());
  EXPECT_TRUE(mb.reqs[1]->grammar_error.empty());
}

// vLLM's bad words: a word's last token is masked where the output ends with the word's other tokens
// (a one-token word: always); on top of allowed_token_ids; a row the bans would empty keeps its tokens.
TEST(StructuredOutput, BadWordsMaskTheLastTokenAfterTheirPrefix) {
  SamplingParams words;
  words.bad_words_token_ids = {{5}, {7, 8, 9}, {2, 40}};
  SamplingParams listed = words;
  listed.allowed_token_ids = {5, 40, 41};
  SamplingParams only = words;
  only.allowed_token_ids = {40};
  MaskedBatch mb({&words, &listed, &only}, {7, 8, 2});  // ends with 2: bans 40; not with 7 8 (9)
  SamplingBatch batch = mb.build();
  ASSERT_EQ(batch.bitmask_rows, (std::vector<int32_t>{0, 1, 2}));
  ASSERT_EQ(batch.token_bitmask.size(), 12u);
  auto row = [&](int r) { return std::vector<uint32_t>(batch.token_bitmask.begin() + 4 * r, batch.token_bitmask.begin() + 4 * r + 4); };
  EXPECT_EQ(row(0), (std::vector<uint32_t>{~(1u << 5), ~(1u << 8), ~0u, ~0u}));  // 5 and 40 banned, 9 not
  EXPECT_EQ(row(1), (std::vector<uint32_t>{0u, 1u << 9, 0u, 0u}));               // {5, 40, 41} less 5, 40
  EXPECT_EQ(row(2), (std::vector<uint32_t>{0u, 1u << 8, 0u, 0u}));               // {40} alone: kept
  mb.reqs[0]->output_token_ids = {1, 7, 8};  // now 9 is banned, 40 is not
  batch = mb.build();
  EXPECT_EQ(row(0), (std::vector<uint32_t>{~(1u << 5 | 1u << 9), ~0u, ~0u, ~0u}));
}

struct Sched {
  SchedulerConfig cfg;
  std::unique_ptr<Scheduler> s;
  Sched() {
    cfg.block_size = 4;
    cfg.num_blocks = 64;
    cfg.eos_token_ids = {kFakeEos};
    s = std::make_unique<Scheduler>(cfg);
  }
  std::shared_ptr<Request> add(const std::shared_ptr<const structured::Grammar>& g, bool ignore_eos) {
    SamplingParams p;
    p.max_tokens = 50;
    p.ignore_eos = ignore_eos;
    p.grammar = g;
    auto r = std::make_shared<Request>("r" + std::to_string(n++), std::vector<int32_t>{1, 2, 3}, p, 0.0);
    r->matcher = std::make_unique<structured::GrammarMatcher>(g, fake_vocab(), cfg.eos_token_ids);
    s->add_request(r);
    return r;
  }
  // One step in which the only running request samples `token`.
  RequestUpdate step(int32_t token) {
    SchedulerOutput out = s->schedule();
    auto u = s->update_from_output(out, {token});
    EXPECT_EQ(u.size(), 1u);
    return u.at(0);
  }
  int n = 0;
};

TEST(StructuredOutput, RequestStopsWhenTheGrammarEndsEvenWithIgnoreEos) {
  Sched t;
  auto r = t.add(choice({"ab", "abc"}), /*ignore_eos=*/true);
  EXPECT_FALSE(t.step(0).finished);  // "a"
  EXPECT_FALSE(t.step(1).finished);  // "ab": complete, but "abc" may follow
  auto u = t.step(kFakeEos);         // EOS ends it although ignore_eos is set
  EXPECT_TRUE(u.finished);
  EXPECT_EQ(r->finish_reason, FinishReason::kStop);

  auto r2 = t.add(choice({"ab", "abc"}), true);
  t.step(0);
  t.step(1);
  EXPECT_TRUE(t.step(2).finished);  // "abc": nothing can follow
  EXPECT_EQ(r2->finish_reason, FinishReason::kStop);
}

TEST(StructuredOutput, ATokenOutsideTheGrammarFailsTheRequest) {
  Sched t;
  auto r = t.add(choice({"ab"}), false);
  EXPECT_TRUE(t.step(7).finished);
  EXPECT_EQ(r->finish_reason, FinishReason::kError);
  EXPECT_NE(r->error.find("not allowed by the grammar"), std::string::npos);
}

TEST(StructuredOutput, ReasoningGatedGrammarStartsAfterItsToken) {
  Sched t;
  SamplingParams p;
  p.max_tokens = 50;
  p.grammar = choice({"ab"});
  p.grammar_start_token = 52;  // ' ' plays "</think>"
  auto r = std::make_shared<Request>("gated", std::vector<int32_t>{1, 2, 3}, p, 0.0);
  r->matcher = std::make_unique<structured::GrammarMatcher>(p.grammar, fake_vocab(), t.cfg.eos_token_ids);
  EXPECT_FALSE(r->grammar_active);
  t.s->add_request(r);
  SchedulerOutput prefill = t.s->schedule();
  BuiltStep built;
  built.rows = {{0, -1}};
  std::mt19937_64 rng(1);
  EXPECT_TRUE(build_sampling_batch(prefill, built, t.cfg.eos_token_ids, rng, 0, 64).bitmask_rows.empty());
  t.s->update_from_output(prefill, {7});  // free text while reasoning
  EXPECT_FALSE(t.step(9).finished);
  EXPECT_FALSE(t.step(52).finished);      // the end of reasoning
  EXPECT_TRUE(r->grammar_active);
  SchedulerOutput next = t.s->schedule();
  EXPECT_EQ(build_sampling_batch(next, built, t.cfg.eos_token_ids, rng, 0, 64).token_bitmask.at(0), 1u);  // 'a'
  // The engine defers the masks to the sampling launch (after the forward is issued): same words.
  SamplingBatch deferred = build_sampling_batch(next, built, t.cfg.eos_token_ids, rng, 0, 64, /*defer_masks=*/true);
  EXPECT_TRUE(deferred.token_bitmask.empty());
  ASSERT_TRUE(deferred.fill_token_bitmask);
  std::vector<uint32_t> words(2, 0xdeadbeefu);
  deferred.fill_token_bitmask(words.data());
  EXPECT_EQ(words, (std::vector<uint32_t>{1u, 0u}));
  t.s->update_from_output(next, {0});
  EXPECT_TRUE(t.step(1).finished);
  EXPECT_EQ(r->finish_reason, FinishReason::kStop);
  // The end token in the prompt (e.g. enable_thinking false): constrained from the start.
  EXPECT_TRUE(Request("p", {1, 52, 3}, p, 0.0).grammar_active);
}

TEST(StructuredOutput, AsyncContinuationTakesConstrainedRequestsOnlyWhenAllowed) {
  Sched t;
  t.add(choice({"abcdefgh"}), false);
  SchedulerOutput prefill = t.s->schedule();
  t.s->update_from_output(prefill, {0});
  SchedulerOutput decode = t.s->schedule();
  EXPECT_FALSE(t.s->schedule_continuation(decode).has_value());
  // The engine samples such a continuation after `decode`'s token advanced the matcher.
  EXPECT_TRUE(t.s->schedule_continuation(decode, /*allow_grammar=*/true).has_value());
}

// Engine over the fake model (context-dependent logits), random sampling. after_add: called once every
// request is added (their matchers made), before the first step.
std::map<std::string, RequestOutput> run_fake(const std::vector<std::pair<std::string, SamplingParams>>& reqs, int num_blocks,
                                              uint64_t* preemptions, const std::function<void()>& after_add = {}) {
  FakeTokenizer tok;
  EngineCoreConfig cfg;
  cfg.seed = 7;
  cfg.scheduler.block_size = 4;
  cfg.scheduler.num_blocks = num_blocks;
  cfg.scheduler.max_num_batched_tokens = 64;
  cfg.scheduler.max_model_len = 512;
  cfg.scheduler.eos_token_ids = {kFakeEos};
  EngineCore core(std::make_unique<FakeModel>(), &tok, cfg);
  int i = 0;
  for (const auto& [prompt, p] : reqs)
    core.add_request(std::make_shared<Request>("q" + std::to_string(i++), tok.encode(prompt, false), p, 0.0));
  if (after_add) after_add();
  std::map<std::string, RequestOutput> agg;
  for (int guard = 0; core.has_unfinished() && guard < 100000; ++guard)
    for (auto& o : core.step()) accumulate_output(agg[o.request_id], std::move(o));
  if (preemptions) *preemptions = core.scheduler().num_preemptions();
  return agg;
}

TEST(StructuredOutput, EngineOutputsFollowTheGrammarThroughPreemption) {
  REQUIRE_MASKED_SAMPLING();
  const std::vector<std::string> words = {"yes", "no", "maybe not", "definitely not going to happen at all", "absolutely certain of it"};
  std::vector<std::pair<std::string, SamplingParams>> reqs;
  for (int k = 0; k < 24; ++k) {
    SamplingParams p;
    p.temperature = 1.0f;
    p.max_tokens = 40;
    p.seed = k;
    p.ignore_eos = k % 3 == 0;
    p.grammar = k % 2 ? choice(words) : schema(R"({"type":"integer","minimum":7,"maximum":999})");
    reqs.emplace_back("prompt " + std::to_string(k), p);
  }
  uint64_t preemptions = 0;
  auto out = run_fake(reqs, /*num_blocks=*/24, &preemptions);
  EXPECT_GT(preemptions, 0u);  // small cache: recompute happened mid-output
  for (int k = 0; k < 24; ++k) {
    const RequestOutput& o = out.at("q" + std::to_string(k));
    EXPECT_EQ(o.finish_reason, "stop") << k << " " << o.error;
    if (k % 2) {
      EXPECT_NE(std::find(words.begin(), words.end(), o.text), words.end()) << o.text;
    } else {
      const long v = std::stol(o.text);
      EXPECT_TRUE(v >= 7 && v <= 999 && std::to_string(v) == o.text) << o.text;
    }
  }
}

// An engine over the built-in default model (dummy weights) on the CPU, with the fake tokenizer.
std::unique_ptr<EngineCore> default_model_core(const FakeTokenizer& tok, uint64_t weight_seed, uint64_t engine_seed,
                                               bool async, int max_num_seqs) {
  LoadOptions lo;
  lo.load_format = "dummy";
  lo.seed = weight_seed;
  auto model = load_model(default_model_config(), "", create_backend("cpu"), lo);
  EngineCoreConfig cfg;
  cfg.seed = engine_seed;
  cfg.async_scheduling = async;
  cfg.scheduler.max_num_seqs = max_num_seqs;
  cfg.scheduler.max_model_len = 256;
  cfg.scheduler.block_size = 4;
  cfg.scheduler.num_blocks = 256;
  cfg.scheduler.eos_token_ids = {kFakeEos};
  return std::make_unique<EngineCore>(std::move(model), &tok, cfg);
}

TEST(StructuredOutput, AsyncSchedulingGivesTheSameConstrainedOutputs) {
  REQUIRE_MASKED_SAMPLING();
  uint64_t launched_ahead = 0;
  auto run = [&](bool async) {
    FakeTokenizer tok;  // ids past its 64 have no bytes, so the grammar masks them
    auto core_ptr = default_model_core(tok, /*weight_seed=*/3, /*engine_seed=*/11, async, /*max_num_seqs=*/2);
    EngineCore& core = *core_ptr;
    SamplingParams free_text;
    free_text.temperature = 0.0f;
    free_text.max_tokens = 12;
    free_text.ignore_eos = true;
    SamplingParams constrained = free_text;
    constrained.grammar = choice({"hello world", "goodbye"});
    core.add_request(std::make_shared<Request>("free", std::vector<int32_t>{5, 6, 7}, free_text, 0.0));
    core.add_request(std::make_shared<Request>("json", std::vector<int32_t>{8, 9}, constrained, 0.0));
    std::map<std::string, RequestOutput> agg;
    for (int guard = 0; core.has_unfinished() && guard < 1000; ++guard)
      for (auto& o : core.step()) accumulate_output(agg[o.request_id], std::move(o));
    if (async) launched_ahead = core.num_steps_launched_ahead();
    return agg;
  };
  auto sync = run(false), async = run(true);
  EXPECT_GT(launched_ahead, 0u);  // constrained steps went ahead too (their sampling launched later)
  EXPECT_TRUE(async.at("json").text == "hello world" || async.at("json").text == "goodbye") << async.at("json").text;
  EXPECT_EQ(async.at("json").finish_reason, "stop");
  EXPECT_EQ(sync.at("json").token_ids, async.at("json").token_ids);
  EXPECT_EQ(sync.at("free").token_ids, async.at("free").token_ids);
}

// Async scheduling with several constrained requests sampled at temperature 1 (seeded): each
// continuation's masks come from matchers advanced by the step before it, so the tokens equal the
// synchronous engine's, requests finish by their grammar in the middle of launched-ahead steps, and
// every output follows its grammar.
TEST(StructuredOutput, AsyncSchedulingSeededConstrainedBatch) {
  REQUIRE_MASKED_SAMPLING();
  uint64_t launched_ahead = 0, sampled_late = 0;
  auto run = [&](bool async) {
    FakeTokenizer tok;
    auto core_ptr = default_model_core(tok, /*weight_seed=*/5, /*engine_seed=*/13, async, /*max_num_seqs=*/4);
    EngineCore& core = *core_ptr;
    for (int k = 0; k < 4; ++k) {
      SamplingParams p;
      p.temperature = 1.0f;
      p.seed = 100 + k;
      p.max_tokens = 24;
      if (k == 3) {
        p.ignore_eos = true;  // free text beside the constrained rows
      } else {
        p.grammar = k % 2 ? choice({"red", "green", "blue and yellow"})
                          : schema(R"({"type":"integer","minimum":10,"maximum":9999})");
      }
      core.add_request(std::make_shared<Request>("r" + std::to_string(k), std::vector<int32_t>{3, 4, 5 + k}, p, 0.0));
    }
    std::map<std::string, RequestOutput> agg;
    for (int guard = 0; core.has_unfinished() && guard < 1000; ++guard)
      for (auto& o : core.step()) accumulate_output(agg[o.request_id], std::move(o));
    if (async) launched_ahead = core.num_steps_launched_ahead(), sampled_late = core.num_steps_sampled_late();
    return agg;
  };
  auto sync = run(false), async = run(true);
  EXPECT_GT(launched_ahead, 0u);
  EXPECT_GT(sampled_late, 0u);  // steps with grammar rows went ahead, sampled once their matchers advanced
  for (int k = 0; k < 4; ++k) {
    const std::string id = "r" + std::to_string(k);
    EXPECT_EQ(sync.at(id).token_ids, async.at(id).token_ids) << id;
    EXPECT_EQ(sync.at(id).finish_reason, async.at(id).finish_reason) << id;
  }
  for (const std::string id : {"r0", "r2"}) {
    const std::string& text = async.at(id).text;
    EXPECT_EQ(async.at(id).finish_reason, "stop") << id << " " << text;
    ASSERT_FALSE(text.empty());
    const long v = std::stol(text);
    EXPECT_TRUE(v >= 10 && v <= 9999 && std::to_string(v) == text) << text;
  }
  const std::string& c = async.at("r1").text;
  EXPECT_TRUE(c == "red" || c == "green" || c == "blue and yellow") << c;
}

// A request whose grammar cannot be matched within the per-mask work bound (VIREO_MAX_MASK_WORK, set
// tiny once the matchers exist, so every fresh mask of a step exceeds it) fails alone, with the error
// marked as the request's own; the request beside it in the same steps gets exactly the tokens it gets on
// its own.
TEST(StructuredOutput, MaskFailureFailsOnlyItsRequest) {
  REQUIRE_MASKED_SAMPLING();
  SamplingParams free_text;
  free_text.temperature = 1.0f;
  free_text.seed = 5;
  free_text.max_tokens = 16;
  free_text.ignore_eos = true;
  SamplingParams constrained = free_text;
  constrained.seed = 6;
  constrained.grammar = schema(R"({"type":"integer","minimum":7,"maximum":999})");
  const auto solo = run_fake({{"free words", free_text}}, 256, nullptr);
  const auto both = run_fake({{"free words", free_text}, {"a number", constrained}}, 256, nullptr,
                             [] { setenv("VIREO_MAX_MASK_WORK", "1", 1); });
  unsetenv("VIREO_MAX_MASK_WORK");
  EXPECT_EQ(both.at("q0").token_ids, solo.at("q0").token_ids);
  EXPECT_EQ(both.at("q0").finish_reason, "length");
  EXPECT_EQ(both.at("q1").finish_reason, "error");
  EXPECT_EQ(both.at("q1").num_output_tokens, 1);  // failed at its first mask, in a step, not when added
  EXPECT_NE(both.at("q1").error.find("too much work"), std::string::npos) << both.at("q1").error;
  EXPECT_TRUE(both.at("q1").error_from_request);  // the server answers 400
}

}  // namespace
}  // namespace vireo
