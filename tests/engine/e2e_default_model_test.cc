// End to end through AsyncEngine::create with the built-in default model (dummy weights) on the
// CPU backend and the real Qwen3 tokenizer: batching, preemption, aborts and prefix caching
// must not change greedy outputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/error.h"
#include "engine/async_engine.h"
#include "engine/llm.h"
#include "template/chat_template.h"
#include "tokenizer/default_dir.h"
#include "tokenizer/tokenizer.h"

namespace vireo {
namespace {

bool have_default_tokenizer() { return std::filesystem::exists(std::filesystem::path(default_tokenizer_dir()) / "tokenizer.json"); }

EngineConfig base_config() {
  EngineConfig c;
  c.model = "default";
  c.device = "cpu";
  c.max_model_len = 256;
  c.max_num_seqs = 64;
  c.max_num_batched_tokens = 512;
  return c;
}

SamplingParams greedy(int n) {
  SamplingParams sp;
  sp.temperature = 0.0f;
  sp.max_tokens = n;
  sp.ignore_eos = true;
  return sp;
}

std::vector<std::vector<int32_t>> make_prompts(const Tokenizer& tok, int n) {
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < n; ++i) {
    std::string text = "Request number " + std::to_string(i) + " asks about";
    for (int k = 0; k < i % 5; ++k) text += " the weather in city " + std::to_string(k * 31 + i);
    out.push_back(tok.encode(text, true));
  }
  return out;
}

TEST(EndToEndDefaultModel, ConcurrentAndPreemptedMatchSolo) {
  if (!have_default_tokenizer()) GTEST_SKIP() << "models/qwen3 missing (run scripts/setup.sh)";
  LLM solo_llm(base_config());
  auto prompts = make_prompts(solo_llm.engine().tokenizer(), 64);
  std::vector<std::vector<int32_t>> solo;
  for (auto& p : prompts) solo.push_back(solo_llm.generate({p}, greedy(12))[0].output.token_ids);

  LLM batch_llm(base_config());
  auto batched = batch_llm.generate(prompts, greedy(12));
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(batched[i].output.token_ids, solo[i]) << i;
  EXPECT_EQ(batch_llm.engine().stats().num_preemptions_total, 0u);

  // A KV cache of 20 blocks (320 tokens) for 64 requests of ~25-60 tokens forces preemption.
  EngineConfig small = base_config();
  // Block bytes of the default model on the CPU: layers * 2 (K, V) * block * kv_heads * head_dim * 4.
  small.kv_cache_memory_bytes = static_cast<size_t>(4) * 2 * 16 * 2 * 64 * 4 * 20;
  LLM tight(small);
  auto pre = tight.generate(prompts, greedy(12));
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(pre[i].output.token_ids, solo[i]) << i;
  auto st = tight.engine().stats();
  EXPECT_GT(st.num_preemptions_total, 0u);
  EXPECT_LE(st.num_total_blocks, 40);  // 20 with fp32 K/V
  EXPECT_EQ(st.num_free_blocks, st.num_total_blocks);
}

TEST(EndToEndDefaultModel, NumGpuBlocksOverrideSetsTheCache) {
  if (!have_default_tokenizer()) GTEST_SKIP() << "models/qwen3 missing (run scripts/setup.sh)";
  // vLLM's --num-gpu-blocks-override: the cache has exactly that many usable blocks, whatever memory says.
  EngineConfig c = base_config();
  c.kv_cache_memory_bytes = size_t{1} << 30;  // the override wins
  c.num_gpu_blocks_override = 37;
  LLM llm(c);
  const auto before = llm.engine().stats();
  EXPECT_EQ(before.num_free_blocks, 37);
  auto out = llm.generate(make_prompts(llm.engine().tokenizer(), 2), greedy(4));
  EXPECT_EQ(out.size(), 2u);
  EXPECT_EQ(llm.engine().stats().num_total_blocks, before.num_total_blocks);
  c.num_gpu_blocks_override = 0;
  EXPECT_THROW(LLM{c}, Error);
}

TEST(EndToEndDefaultModel, MaxModelLenAutoFitsTheKvCache) {
  if (!have_default_tokenizer()) GTEST_SKIP() << "models/qwen3 missing (run scripts/setup.sh)";
  // vLLM's --max-model-len auto (-1): the model's length (4,096 here) when the cache holds it, else the
  // longest it holds; a fixed length that does not fit is an error naming that estimate.
  EngineConfig c = base_config();
  c.max_model_len = -1;
  c.num_gpu_blocks_override = 100;  // 1,600 tokens
  auto eng = AsyncEngine::create(c);
  EXPECT_EQ(eng->max_model_len(), 1600);
  c.num_gpu_blocks_override = 1000;
  EXPECT_EQ(AsyncEngine::create(c)->max_model_len(), 4096);
  c.max_model_len = 0;
  c.num_gpu_blocks_override = 100;
  try {
    AsyncEngine::create(c);
    ADD_FAILURE() << "the model's 4,096 tokens do not fit 1,600";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("estimated maximum model length is 1600"), std::string::npos) << e.what();
  }
}

TEST(EndToEndDefaultModel, AbortHalfLeavesNothingRunning) {
  if (!have_default_tokenizer()) GTEST_SKIP() << "models/qwen3 missing (run scripts/setup.sh)";
  auto eng = AsyncEngine::create(base_config());
  auto prompts = make_prompts(eng->tokenizer(), 16);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (size_t i = 0; i < prompts.size(); ++i)
    streams.push_back(eng->add_request("r" + std::to_string(i), prompts[i], greedy(64)));
  for (auto& s : streams) ASSERT_TRUE(s->next(std::chrono::milliseconds(60000)).has_value());
  for (size_t i = 0; i < prompts.size(); i += 2) eng->abort("r" + std::to_string(i));
  // Let the other half finish.
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::optional<RequestOutput> last;
    while (auto d = streams[i]->next(std::chrono::milliseconds(120000))) {
      last = d;
      if (d->finished) break;
    }
    ASSERT_TRUE(last && last->finished);
    EXPECT_EQ(last->finish_reason, i % 2 == 0 ? "abort" : "length");
  }
  auto st = eng->stats();
  EXPECT_EQ(st.num_requests_running, 0);
  EXPECT_EQ(st.num_free_blocks, st.num_total_blocks);
  eng->shutdown(std::chrono::milliseconds(1000));
}

TEST(EndToEndDefaultModel, PrefixCachingOnOffSameOutputs) {
  if (!have_default_tokenizer()) GTEST_SKIP() << "models/qwen3 missing (run scripts/setup.sh)";
  std::vector<std::vector<int32_t>> outs[2];
  uint64_t hits[2] = {0, 0};
  for (int on = 0; on < 2; ++on) {
    EngineConfig c = base_config();
    c.enable_prefix_caching = on == 1;
    LLM llm(c);
    const auto& tok = llm.engine().tokenizer();
    std::string shared = "You are a helpful assistant. Answer briefly and precisely, and always cite the source "
                         "of every fact you state in your answer, please.";
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < 8; ++i) prompts.push_back(tok.encode(shared + " Question " + std::to_string(i) + "?", true));
    // First one alone (fills the cache), then the rest together.
    outs[on].push_back(llm.generate({prompts[0]}, greedy(10))[0].output.token_ids);
    auto rest = llm.generate(std::vector<std::vector<int32_t>>(prompts.begin() + 1, prompts.end()), greedy(10));
    for (auto& r : rest) outs[on].push_back(r.output.token_ids);
    hits[on] = llm.engine().stats().prefix_cache_hits;
  }
  EXPECT_EQ(outs[0], outs[1]);
  EXPECT_EQ(hits[0], 0u);
  EXPECT_GT(hits[1], 0u);
}

// logit_bias: +100 on one id makes greedy decoding emit it every step; -100 on the tokens an
// unbiased run chose bans them; the bias of one request leaves its batch-mates unchanged.
TEST(EndToEndDefaultModel, LogitBias) {
  if (!have_default_tokenizer()) GTEST_SKIP() << "models/qwen3 missing (run scripts/setup.sh)";
  LLM llm(base_config());
  const auto prompts = make_prompts(llm.engine().tokenizer(), 3);
  const auto plain = llm.generate(prompts, greedy(6));
  SamplingParams force = greedy(6);
  force.logit_bias = {{1234, 100.0f}};
  SamplingParams ban = greedy(6);
  for (int32_t t : plain[1].output.token_ids) ban.logit_bias.emplace_back(t, -100.0f);
  std::sort(ban.logit_bias.begin(), ban.logit_bias.end());
  ban.logit_bias.erase(std::unique(ban.logit_bias.begin(), ban.logit_bias.end(),
                                   [](auto& a, auto& b) { return a.first == b.first; }),
                       ban.logit_bias.end());
  const auto forced = llm.generate({prompts[0]}, force)[0].output.token_ids;
  EXPECT_EQ(forced, std::vector<int32_t>(6, 1234));
  const auto banned = llm.generate({prompts[1]}, ban)[0].output.token_ids;
  ASSERT_EQ(banned.size(), 6u);
  for (int32_t t : banned)
    for (const auto& [id, b] : ban.logit_bias) EXPECT_NE(t, id);
  // Mixed in one batch: the others' outputs are unchanged.
  auto mixed = llm.generate({prompts[0], prompts[2]}, std::vector<SamplingParams>{force, greedy(6)});
  EXPECT_EQ(mixed[0].output.token_ids, forced);
  EXPECT_EQ(mixed[1].output.token_ids, plain[2].output.token_ids);
}

// vLLM's allowed_token_ids: every output token is one of the list (greedy and sampled), the others in the
// batch are unchanged, and a list of one id forces it.
TEST(EndToEndDefaultModel, AllowedTokenIds) {
  if (!have_default_tokenizer()) GTEST_SKIP() << "models/qwen3 missing (run scripts/setup.sh)";
  LLM llm(base_config());
  const auto prompts = make_prompts(llm.engine().tokenizer(), 3);
  const auto plain = llm.generate(prompts, greedy(8));
  const std::vector<int32_t> allowed = {17, 500, 9001, 20000, 31337};
  SamplingParams some = greedy(8);
  some.allowed_token_ids = allowed;
  SamplingParams drawn = some;
  drawn.temperature = 1.0f;
  drawn.seed = 5;
  SamplingParams one = greedy(4);
  one.allowed_token_ids = {4242};
  auto out = llm.generate({prompts[0], prompts[1], prompts[2], prompts[0]},
                          std::vector<SamplingParams>{some, greedy(8), drawn, one});
  for (int i : {0, 2}) {
    ASSERT_EQ(out[i].output.token_ids.size(), 8u) << i;
    for (int32_t t : out[i].output.token_ids) EXPECT_TRUE(std::binary_search(allowed.begin(), allowed.end(), t)) << i << ": " << t;
  }
  EXPECT_EQ(out[1].output.token_ids, plain[1].output.token_ids);
  EXPECT_EQ(out[3].output.token_ids, std::vector<int32_t>(4, 4242));
}

// vLLM's bad_words on the default model: a banned one-token word never appears, and a two-token word
// (here often one token twice: greedy decoding on dummy weights repeats) is cut where the greedy path
// first reaches it; async scheduling on and off agree (AsyncScheduling.BadWordsMatchSynchronous checks
// the late masks with varied tokens); the other requests of the batch are unchanged.
TEST(EndToEndDefaultModel, BadWords) {
  if (!have_default_tokenizer()) GTEST_SKIP() << "models/qwen3 missing (run scripts/setup.sh)";
  std::vector<std::vector<int32_t>> runs;
  for (int async : {0, 1}) {
    SCOPED_TRACE(async);
    EngineConfig c = base_config();
    c.async_scheduling = async;
    LLM llm(c);
    const auto prompts = make_prompts(llm.engine().tokenizer(), 2);
    const auto plain = llm.generate(prompts, greedy(10));
    const auto& t = plain[0].output.token_ids;
    SamplingParams one = greedy(10), two = greedy(10);
    one.bad_words_token_ids = {{t[0]}};
    two.bad_words_token_ids = {{t[3], t[4]}};
    auto out = llm.generate({prompts[0], prompts[0], prompts[1]}, std::vector<SamplingParams>{one, two, greedy(10)});
    for (int32_t id : out[0].output.token_ids) EXPECT_NE(id, t[0]);
    // The two-token word: the greedy path up to the word's first occurrence in it, then not its second
    // token there, and never the word anywhere.
    const auto& o = out[1].output.token_ids;
    ASSERT_EQ(o.size(), 10u);
    size_t j = 1;
    while (!(t[j - 1] == t[3] && t[j] == t[4])) ++j;  // <= 4
    EXPECT_EQ(std::vector<int32_t>(o.begin(), o.begin() + j), std::vector<int32_t>(t.begin(), t.begin() + j));
    for (size_t i = 1; i < o.size(); ++i)
      if (o[i - 1] == t[3]) EXPECT_NE(o[i], t[4]) << "at " << i;
    EXPECT_EQ(out[2].output.token_ids, plain[1].output.token_ids);
    runs.push_back(out[0].output.token_ids);
    runs.push_back(o);
  }
  EXPECT_EQ(runs[0], runs[2]);
  EXPECT_EQ(runs[1], runs[3]);
}

// --chat-template: inline text or a file replaces the tokenizer's template; a broken one fails start-up.
TEST(EndToEndDefaultModel, ChatTemplateOverride) {
  if (!have_default_tokenizer()) GTEST_SKIP() << "models/qwen3 missing (run scripts/setup.sh)";
  const nlohmann::json msgs = nlohmann::json::array({{{"role", "user"}, {"content", "hi"}}});
  EngineConfig c = base_config();
  c.chat_template = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}";
  auto inline_eng = AsyncEngine::create(c);
  EXPECT_EQ(inline_eng->chat_template()->apply(msgs, {}), "<user>hi");
  inline_eng->shutdown(std::chrono::milliseconds(0));
  const std::string path = ::testing::TempDir() + "/vireo_chat_template.jinja";
  { std::ofstream(path) << "[{{ messages[0].content }}]"; }
  c.chat_template = path;
  auto file_eng = AsyncEngine::create(c);
  EXPECT_EQ(file_eng->chat_template()->apply(msgs, {}), "[hi]");
  file_eng->shutdown(std::chrono::milliseconds(0));
  c.chat_template = "{{ unclosed";
  EXPECT_THROW(AsyncEngine::create(c), Error);
  c.chat_template = "/no/such/template.jinja";
  EXPECT_THROW(AsyncEngine::create(c), Error);
}

// The auto scheduler limits resolve at creation (the CPU: vLLM's 256 sequences, 2048 tokens a step).
TEST(EndToEndDefaultModel, AutoLimitsResolve) {
  if (!have_default_tokenizer()) GTEST_SKIP() << "models/qwen3 missing (run scripts/setup.sh)";
  EngineConfig c = base_config();
  c.max_num_seqs = 0;
  c.max_num_batched_tokens = 0;
  auto eng = AsyncEngine::create(c);
  EXPECT_EQ(eng->config().max_num_seqs, 256);
  EXPECT_EQ(eng->config().max_num_batched_tokens, 2048);
  c.max_num_seqs = -1;
  EXPECT_THROW(AsyncEngine::create(c), Error);
}

}  // namespace
}  // namespace vireo
