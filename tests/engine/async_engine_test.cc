// AsyncEngineImpl over the fake model: streams from several threads, aborts, shutdown,
// validation messages, stats, and the LLM offline helper.
#include "engine/async_engine_impl.h"

#include <gtest/gtest.h>

#include <thread>

#include "core/error.h"
#include "engine/llm.h"
#include "fakes.h"

namespace vireo {
namespace {

using testing::FakeModel;
using testing::FakeTokenizer;
using testing::fake_greedy;
using testing::kFakeEos;

std::unique_ptr<AsyncEngineImpl> make_engine(int num_blocks = 1024, std::chrono::milliseconds delay = {},
                                             int max_num_seqs = 32) {
  EngineParts parts;
  parts.config.block_size = 4;
  parts.config.max_num_seqs = max_num_seqs;
  parts.config.max_num_batched_tokens = 128;
  parts.tokenizer = std::make_unique<FakeTokenizer>();
  parts.model = std::make_unique<FakeModel>(nullptr, -1, delay);
  parts.max_model_len = 128;
  parts.num_kv_blocks = num_blocks;
  parts.eos_token_ids = {kFakeEos};
  return std::make_unique<AsyncEngineImpl>(std::move(parts));
}

SamplingParams greedy(int max_tokens) {
  SamplingParams sp;
  sp.temperature = 0.0f;
  sp.max_tokens = max_tokens;
  sp.ignore_eos = true;
  return sp;
}

RequestOutput drain(RequestStream& s, int* num_deltas = nullptr) {
  RequestOutput agg;
  while (auto d = s.next(std::chrono::milliseconds(5000))) {
    if (num_deltas) ++*num_deltas;
    bool fin = d->finished;
    accumulate_output(agg, std::move(*d));
    if (fin) break;
  }
  return agg;
}

// --max-num-batched-tokens 0 (the default) follows vLLM serve: 8192 on GPUs of >= 70 GiB, else 2048.
TEST(AsyncEngine, DefaultTokenBudgetFollowsDeviceMemory) {
  constexpr size_t kGiB = size_t{1} << 30;
  EXPECT_EQ(default_max_num_batched_tokens(0), 2048);  // the CPU
  EXPECT_EQ(default_max_num_batched_tokens(40 * kGiB), 2048);
  EXPECT_EQ(default_max_num_batched_tokens(70 * kGiB), 8192);
  EXPECT_EQ(default_max_num_batched_tokens(141 * kGiB), 8192);  // H200
  EXPECT_EQ(EngineConfig{}.max_num_batched_tokens, 0);
}

// --max-num-seqs 0 (the default) follows vLLM serve: 1024 on GPUs of >= 70 GiB, else 256.
TEST(AsyncEngine, DefaultMaxNumSeqsFollowsDeviceMemory) {
  constexpr size_t kGiB = size_t{1} << 30;
  EXPECT_EQ(default_max_num_seqs(0), 256);  // the CPU
  EXPECT_EQ(default_max_num_seqs(40 * kGiB), 256);
  EXPECT_EQ(default_max_num_seqs(80 * kGiB), 1024);
  EXPECT_EQ(default_max_num_seqs(141 * kGiB), 1024);  // H200
  EXPECT_EQ(EngineConfig{}.max_num_seqs, 0);
  EXPECT_LE(kMaxGraphBatchSize, 512);
}

TEST(AsyncEngine, ConcurrentStreamsFromManyThreads) {
  auto eng = make_engine();
  std::vector<std::thread> threads;
  std::vector<RequestOutput> outs(16);
  std::vector<std::vector<int32_t>> prompts(16);
  for (int i = 0; i < 16; ++i) prompts[i] = {i % 60, (i * 7) % 60, 3, 4, 5};
  for (int i = 0; i < 16; ++i) {
    threads.emplace_back([&, i] {
      auto s = eng->add_request("t" + std::to_string(i), prompts[i], greedy(12));
      int n = 0;
      outs[i] = drain(*s, &n);
      EXPECT_EQ(n, 12);
      EXPECT_FALSE(s->next(std::chrono::milliseconds(1)).has_value());  // after the final output
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(outs[i].token_ids, fake_greedy(prompts[i], 12));
    EXPECT_TRUE(outs[i].finished);
    EXPECT_EQ(outs[i].finish_reason, "length");
  }
  auto st = eng->stats();
  EXPECT_EQ(st.num_requests_running, 0);
  EXPECT_EQ(st.generation_tokens_total, 16u * 12u);
  EXPECT_EQ(st.prompt_tokens_total, 16u * 5u);
  EXPECT_EQ(st.request_success_total, 16u);
  EXPECT_EQ(st.time_to_first_token_seconds.count, 16u);
  EXPECT_EQ(st.num_free_blocks, st.num_total_blocks);
}

TEST(AsyncEngine, ValidationMessages) {
  auto eng = make_engine();
  SamplingParams sp = greedy(100);
  try {
    eng->add_request("long", std::vector<int32_t>(40, 1), sp);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("maximum context length is 128 tokens"), std::string::npos) << m;
    EXPECT_NE(m.find("you requested 140 tokens (40 in the messages, 100 in the completion)"), std::string::npos) << m;
  }
  EXPECT_THROW(eng->add_request("empty", {}, greedy(1)), Error);
  EXPECT_THROW(eng->add_request("oov", {1, 64}, greedy(1)), Error);
  EXPECT_THROW(eng->add_request("neg", {-1}, greedy(1)), Error);
  SamplingParams bad = greedy(4);
  bad.top_p = 0.0f;
  EXPECT_THROW(eng->add_request("topp", {1}, bad), Error);
  bad = greedy(4);
  bad.logprobs = 21;
  EXPECT_THROW(eng->add_request("lp", {1}, bad), Error);
  auto slow = make_engine(1024, std::chrono::milliseconds(20));
  auto s = slow->add_request("dup", {1, 2}, greedy(50));
  EXPECT_THROW(slow->add_request("dup", {1, 2}, greedy(2)), Error);  // while "dup" is live
  slow->abort("dup");
  EXPECT_EQ(drain(*s).finish_reason, "abort");
}

TEST(AsyncEngine, AbortHalfFromOtherThreads) {
  auto eng = make_engine(1024, std::chrono::milliseconds(2));
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 20; ++i) streams.push_back(eng->add_request("a" + std::to_string(i), {1, 2, 3, i}, greedy(100)));
  // Wait until generation is under way.
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(streams[i]->next(std::chrono::milliseconds(5000)).has_value());
  std::vector<std::thread> ts;
  for (int i = 0; i < 20; i += 2) ts.emplace_back([&, i] { eng->abort("a" + std::to_string(i)); });
  for (auto& t : ts) t.join();
  eng->abort("nope");
  for (int i = 0; i < 20; ++i) {
    auto o = drain(*streams[i]);
    EXPECT_TRUE(o.finished);
    EXPECT_EQ(o.finish_reason, i % 2 == 0 ? "abort" : "length") << i;
  }
  auto st = eng->stats();
  EXPECT_EQ(st.num_requests_running, 0);
  EXPECT_EQ(st.num_requests_waiting, 0);
  EXPECT_EQ(st.num_free_blocks, st.num_total_blocks);
}

TEST(AsyncEngine, PreemptionUnderSmallCacheStillCorrect) {
  auto eng = make_engine(40);  // 39 blocks of 4 tokens for 32 requests of up to ~30 tokens
  std::vector<std::shared_ptr<RequestStream>> streams;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 32; ++i) {
    prompts.push_back({i, 1, 2, 3, 4, 5, i % 7});
    streams.push_back(eng->add_request("p" + std::to_string(i), prompts.back(), greedy(20)));
  }
  for (int i = 0; i < 32; ++i) EXPECT_EQ(drain(*streams[i]).token_ids, fake_greedy(prompts[i], 20));
  auto st = eng->stats();
  EXPECT_GT(st.num_preemptions_total, 0u);
  EXPECT_EQ(st.num_free_blocks, st.num_total_blocks);
}

TEST(AsyncEngine, ShutdownAbortsWhatIsLeftAndRejectsNewRequests) {
  auto eng = make_engine(1024, std::chrono::milliseconds(5));
  auto s = eng->add_request("long", {1, 2, 3}, greedy(120));
  ASSERT_TRUE(s->next(std::chrono::milliseconds(5000)).has_value());
  eng->shutdown(std::chrono::milliseconds(20));
  auto o = drain(*s);
  EXPECT_EQ(o.finish_reason, "abort");
  EXPECT_THROW(eng->add_request("late", {1}, greedy(1)), Error);
}

TEST(AsyncEngine, ShutdownDrainsShortRequests) {
  auto eng = make_engine();
  auto s = eng->add_request("short", {1, 2, 3}, greedy(5));
  eng->shutdown(std::chrono::milliseconds(10000));
  auto o = drain(*s);
  EXPECT_EQ(o.finish_reason, "length");
  EXPECT_EQ(o.token_ids.size(), 5u);
}

TEST(AsyncEngine, LlmGenerateKeepsInputOrder) {
  LLM llm(make_engine());
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 10; ++i) prompts.push_back({i + 1, 2 * i + 1, 5});
  size_t num_deltas = 0;
  auto res = llm.generate(prompts, greedy(7), [&](size_t, const RequestOutput&) { ++num_deltas; });
  ASSERT_EQ(res.size(), 10u);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(res[i].prompt_token_ids, prompts[i]);
    EXPECT_EQ(res[i].output.token_ids, fake_greedy(prompts[i], 7));
  }
  EXPECT_EQ(num_deltas, 70u);
  // A bad prompt fails the whole call and leaves nothing running.
  prompts.push_back({});
  EXPECT_THROW(llm.generate(prompts, greedy(7)), Error);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(llm.engine().stats().num_requests_running, 0);
}

}  // namespace
}  // namespace vireo
