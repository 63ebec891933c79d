// --runner pooling: a prompt's embedding is the final hidden state model.norm(h) of its last token (LAST),
// first token (CLS) or the mean over its tokens (MEAN). The qwen3 fixture ties its lm_head to the
// embeddings, so logits = E h and, the lm_head being linear, E @ embedding must equal the generate
// path's logits of that token (LAST, CLS) or the mean of every position's logits (MEAN), whatever
// the prefill chunking; normalised embeddings are the same vectors scaled to unit length.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "../gguf_util/hf_to_gguf.h"
#include "../model/model_test_util.h"
#include "../model/safetensors_util.h"
#include "core/error.h"
#include "engine/llm.h"
#include "engine/pooling_config.h"
#include "tokenizer/default_dir.h"
#include "tokenizer/tokenizer.h"

namespace vireo {
namespace {

namespace fs = std::filesystem;

const fs::path kFixture = fs::path(VIREO_SOURCE_DIR) / "tests/fixtures/model/qwen3";

EngineConfig pooling_config(const std::string& pooler) {
  EngineConfig c;
  c.model = kFixture.string();
  c.tokenizer = default_tokenizer_dir();
  c.device = "cpu";
  c.max_model_len = 128;
  c.max_num_seqs = 4;
  c.max_num_batched_tokens = 16;  // a 37-token prompt runs in three chunks
  c.runner = "pooling";
  c.pooler_config = pooler;
  return c;
}

std::vector<int32_t> prompt(int n, int salt) {
  std::vector<int32_t> ids;
  for (int j = 0; j < n; ++j) ids.push_back((j * 31 + salt * 7 + 3) % 500);
  return ids;
}

// E @ v for the fixture's (tied) embedding matrix E [vocab, hidden].
std::vector<double> project(const std::vector<float>& v) {
  const auto t = testing::read_safetensors(kFixture / "model.safetensors");
  const auto& e = t.at("model.embed_tokens.weight");
  const int64_t V = e.shape[0], H = e.shape[1];
  EXPECT_EQ(static_cast<int64_t>(v.size()), H);
  const float* w = reinterpret_cast<const float*>(e.bytes.data());
  std::vector<double> out(static_cast<size_t>(V), 0.0);
  for (int64_t r = 0; r < V; ++r)
    for (int64_t h = 0; h < H; ++h) out[r] += static_cast<double>(w[r * H + h]) * v[h];
  return out;
}

// Every position's logits of `ids` from the generate path, [n, V].
std::vector<float> all_logits(const std::vector<int32_t>& ids) {
  auto model = load_model(kFixture.string(), create_backend("cpu"), {});
  KvCache kv = model->allocate_kv_cache(8, 16);
  testing::SeqDriver d{*model, kv, testing::contiguous_table(8)};
  std::vector<float> l = d.step(ids, true);
  model->free_kv_cache(kv);
  return l;
}

std::vector<float> embed(LLM& llm, const std::vector<int32_t>& ids) {
  SamplingParams sp;
  sp.max_tokens = 1;
  auto r = llm.generate({ids}, sp);
  EXPECT_EQ(r[0].output.finish_reason, "stop");
  return r[0].output.embedding;
}

void expect_projection(const std::vector<float>& emb, const float* logits, int64_t V, const std::string& what) {
  const std::vector<double> p = project(emb);
  double diff = 0, ref = 0;
  for (int64_t i = 0; i < V; ++i) {
    diff = std::max(diff, std::abs(p[i] - logits[i]));
    ref = std::max(ref, std::abs(static_cast<double>(logits[i])));
  }
  EXPECT_LT(diff / ref, 1e-5) << what;
}

TEST(Pooling, EmbeddingsAreTheFinalHiddenStatesOfTheGeneratePath) {
  if (!fs::exists(fs::path(default_tokenizer_dir()) / "tokenizer.json")) GTEST_SKIP() << "models/qwen3 missing";
  const auto ids = prompt(37, 1);
  const std::vector<float> logits = all_logits(ids);
  const int64_t V = static_cast<int64_t>(logits.size() / ids.size());
  {
    LLM last(pooling_config(R"({"pooling_type": "LAST", "normalize": false})"));
    const auto e = embed(last, ids);
    expect_projection(e, logits.data() + (ids.size() - 1) * V, V, "LAST");
    EXPECT_EQ(embed(last, ids), e);  // again: its prefix from the cache, the last token rerun
  }
  {
    LLM cls(pooling_config(R"({"pooling_type": "CLS", "normalize": false})"));
    expect_projection(embed(cls, ids), logits.data(), V, "CLS");
  }
  {
    LLM mean(pooling_config(R"({"pooling_type": "MEAN", "normalize": false})"));
    std::vector<float> avg(static_cast<size_t>(V), 0.0f);
    for (size_t t = 0; t < ids.size(); ++t)
      for (int64_t v = 0; v < V; ++v) avg[v] += logits[t * V + v] / static_cast<float>(ids.size());
    const auto e = embed(mean, ids);
    expect_projection(e, avg.data(), V, "MEAN");
    EXPECT_EQ(embed(mean, ids), e);  // MEAN runs without the prefix cache: every row is pooled again
  }
  LLM raw(pooling_config(R"({"pooling_type": "LAST", "normalize": false})"));
  LLM unit(pooling_config(""));  // the default: LAST, normalised
  // Several prompts in one batch, one of them the same as before.
  const std::vector<std::vector<int32_t>> batch = {prompt(5, 2), ids, prompt(20, 3)};
  SamplingParams sp;
  sp.max_tokens = 1;
  const auto a = raw.generate(batch, sp), b = unit.generate(batch, sp);
  for (size_t i = 0; i < batch.size(); ++i) {
    const auto& x = a[i].output.embedding;
    const auto& y = b[i].output.embedding;
    ASSERT_EQ(x.size(), y.size());
    double n = 0;
    for (float v : x) n += static_cast<double>(v) * v;
    n = std::sqrt(n);
    for (size_t h = 0; h < x.size(); ++h) EXPECT_NEAR(y[h], x[h] / n, 1e-6) << i;
    EXPECT_EQ(a[i].output.num_prompt_tokens, static_cast<int>(batch[i].size()));
  }
  const auto solo = embed(raw, ids);  // the same prompt alone (batching changes the CPU GEMMs' sums a little)
  EXPECT_LT(testing::rel_max_err(a[1].output.embedding.data(), solo.data(), solo.size()), 1e-5);
}

// A base model's checkpoint (AutoModel's layout: "LlamaModel", no "model." prefix, no lm_head), as
// embedding models ship: runner auto pools it, and its embeddings are the causal LM's.
TEST(Pooling, BaseModelCheckpointsPoolByDefault) {
  if (!fs::exists(fs::path(default_tokenizer_dir()) / "tokenizer.json")) GTEST_SKIP() << "models/qwen3 missing";
  const fs::path llama = fs::path(VIREO_SOURCE_DIR) / "tests/fixtures/model/llama3";  // untied lm_head
  const fs::path dir = fs::path(::testing::TempDir()) / ("vireo_base_model_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::map<std::string, testing::RawTensor> stripped;
  for (auto& [name, t] : testing::read_safetensors(llama / "model.safetensors")) {
    if (name == "lm_head.weight") continue;
    stripped[name.rfind("model.", 0) == 0 ? name.substr(6) : name] = t;
  }
  testing::write_safetensors(dir / "model.safetensors", stripped);
  nlohmann::json cfg = nlohmann::json::parse(std::ifstream(llama / "config.json"));
  cfg["architectures"] = {"LlamaModel"};
  std::ofstream(dir / "config.json") << cfg.dump();
  EngineConfig base = pooling_config("");
  base.model = dir.string();
  base.runner = "auto";  // the default
  EngineConfig causal = pooling_config("");
  causal.model = llama.string();
  const auto ids = prompt(21, 4);
  LLM a(base), b(causal);
  ASSERT_TRUE(a.engine().config().pooling.enabled);
  const auto x = embed(a, ids), y = embed(b, ids);
  ASSERT_EQ(x.size(), y.size());
  EXPECT_LT(testing::rel_max_err(x.data(), y.data(), y.size()), 1e-6);
  causal.runner = "generate";  // a causal LM's checkpoint without a head cannot generate
  causal.model = dir.string();
  EXPECT_THROW(LLM{causal}, Error);
  fs::remove_all(dir);
}

// A sequence classifier (Qwen3ForSequenceClassification: the qwen3 fixture with score.weight [2, hidden]):
// its outputs are score.weight @ h of the last token, h as the causal LM's unnormalised LAST embedding.
TEST(Pooling, SequenceClassifierAppliesScoreWeight) {
  if (!fs::exists(fs::path(default_tokenizer_dir()) / "tokenizer.json")) GTEST_SKIP() << "models/qwen3 missing";
  const fs::path dir = fs::path(::testing::TempDir()) / ("vireo_seq_cls_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto tensors = testing::read_safetensors(kFixture / "model.safetensors");
  const int64_t H = tensors.at("model.norm.weight").shape[0];
  std::vector<float> w(static_cast<size_t>(2 * H));
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(0.37f * static_cast<float>(i)) * 0.2f;
  tensors["score.weight"] = {"F32", {2, H}, std::string(reinterpret_cast<const char*>(w.data()), w.size() * 4)};
  testing::write_safetensors(dir / "model.safetensors", tensors);
  nlohmann::json cfg = nlohmann::json::parse(std::ifstream(kFixture / "config.json"));
  cfg["architectures"] = {"Qwen3ForSequenceClassification"};
  cfg["id2label"] = {{"0", "negative"}, {"1", "positive"}};
  std::ofstream(dir / "config.json") << cfg.dump();
  EngineConfig c = pooling_config("");
  c.model = dir.string();
  c.runner = "auto";
  LLM cls(c);
  ASSERT_TRUE(cls.engine().config().pooling.classifies());
  EXPECT_EQ(cls.engine().config().pooling.labels, (std::vector<std::string>{"negative", "positive"}));
  LLM last(pooling_config(R"({"pooling_type": "LAST", "normalize": false})"));
  const auto ids = prompt(23, 5);
  const auto logits = embed(cls, ids), h = embed(last, ids);
  ASSERT_EQ(logits.size(), 2u);
  for (int c2 = 0; c2 < 2; ++c2) {
    double want = 0;
    for (int64_t k = 0; k < H; ++k) want += static_cast<double>(w[c2 * H + k]) * h[k];
    EXPECT_NEAR(logits[c2], want, 1e-4 * (1 + std::abs(want))) << c2;
  }
  fs::remove_all(dir);
}

// vLLM's recipe for the original Qwen3-Reranker: --hf-overrides '{"architectures":
// ["Qwen3ForSequenceClassification"], "classifier_from_token": ["no", "yes"]}' on the causal checkpoint. The
// one label's probability is softmax([logit(no), logit(yes)])[yes] of the generate path's last token.
TEST(Pooling, ClassifierFromTokensIsTheTwoWaySoftmax) {
  if (!fs::exists(fs::path(default_tokenizer_dir()) / "tokenizer.json")) GTEST_SKIP() << "models/qwen3 missing";
  EngineConfig c = pooling_config("");
  c.runner = "auto";
  c.hf_overrides = R"({"architectures": ["Qwen3ForSequenceClassification"], "classifier_from_token": ["a", "b"],
                       "is_original_qwen3_reranker": true})";
  LLM rr(c);
  ASSERT_TRUE(rr.engine().config().pooling.classifies());
  const int32_t a = *rr.engine().tokenizer().token_to_id("a"), b = *rr.engine().tokenizer().token_to_id("b");
  const auto ids = prompt(19, 6);
  const std::vector<float> logits = all_logits(ids);
  const int64_t V = static_cast<int64_t>(logits.size() / ids.size());
  ASSERT_LT(std::max(a, b), V);
  const float* last = logits.data() + (ids.size() - 1) * V;
  const auto out = embed(rr, ids);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_NEAR(out[0], last[b] - last[a], 1e-4 * (1 + std::abs(last[b] - last[a])));
  c.hf_overrides = R"({"architectures": ["Qwen3ForSequenceClassification"], "classifier_from_token": ["no such token"]})";
  EXPECT_THROW(LLM{c}, Error);
}

// llama.cpp's embedding GGUFs say their pooling in <arch>.pooling_type (3 last, 1 mean): runner auto pools
// them, and the qwen3 fixture's F32 GGUF gives its safetensors embeddings.
TEST(Pooling, GgufPoolingTypeSelectsThePooler) {
  if (!fs::exists(fs::path(default_tokenizer_dir()) / "tokenizer.json")) GTEST_SKIP() << "models/qwen3 missing";
  const auto ids = prompt(29, 7);
  for (const auto& [type, pooler] : {std::pair<uint32_t, std::string>{3, "LAST"}, {1, "MEAN"}}) {
    const std::string path =
        (fs::path(::testing::TempDir()) / ("vireo_pool_" + std::to_string(::getpid()) + ".gguf")).string();
    testing::ConvertOptions o;
    o.extra_metadata = [type](testing::GgufWriter& w) { w.add_u32("qwen3.pooling_type", type); };
    testing::convert_model_fixture(kFixture.string(), path, o);
    EngineConfig g = pooling_config("");
    g.model = path;
    g.runner = "auto";
    LLM from_gguf(g);
    ASSERT_TRUE(from_gguf.engine().config().pooling.enabled) << type;
    LLM from_st(pooling_config(R"({"pooling_type": ")" + pooler + R"("})"));
    const auto x = embed(from_gguf, ids), y = embed(from_st, ids);
    ASSERT_EQ(x.size(), y.size());
    EXPECT_LT(testing::rel_max_err(x.data(), y.data(), y.size()), 1e-5) << pooler;
    fs::remove(path);
  }
}

TEST(Pooling, ResolvesPoolerConfigAndSentenceTransformersModules) {
  PoolingSpec s = resolve_pooling("generate", "", "");
  EXPECT_FALSE(s.enabled);
  EXPECT_THROW(resolve_pooling("generate", R"({"pooling_type": "MEAN"})", ""), Error);
  EXPECT_THROW(resolve_pooling("classify", "", ""), Error);
  EXPECT_FALSE(resolve_pooling("auto", "", kFixture.string()).enabled);  // a causal LM generates
  EXPECT_TRUE(resolve_pooling("auto", R"({"pooling_type": "MEAN"})", "").enabled);
  s = resolve_pooling("pooling", "", "");
  EXPECT_TRUE(s.enabled);
  EXPECT_EQ(s.type, PoolingSpec::Type::kLast);
  EXPECT_TRUE(s.normalize);
  s = resolve_pooling("pooling", R"({"pooling_type": "CLS", "normalize": false})", "");
  EXPECT_EQ(s.type, PoolingSpec::Type::kCls);
  EXPECT_FALSE(s.normalize);
  EXPECT_THROW(resolve_pooling("pooling", R"({"pooling_type": "MAX"})", ""), Error);
  EXPECT_THROW(resolve_pooling("pooling", R"({"softmax": true})", ""), Error);
  EXPECT_THROW(resolve_pooling("pooling", "[1]", ""), Error);
  // sentence-transformers: modules.json with a Pooling module (mean tokens) and no Normalize.
  const fs::path dir = fs::path(::testing::TempDir()) / ("vireo_st_" + std::to_string(::getpid()));
  fs::create_directories(dir / "1_Pooling");
  std::ofstream(dir / "modules.json") << R"([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
      {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}])";
  std::ofstream(dir / "1_Pooling/config.json") << R"({"word_embedding_dimension": 64, "pooling_mode_mean_tokens": true})";
  s = resolve_pooling("pooling", "", dir.string());
  EXPECT_EQ(s.type, PoolingSpec::Type::kMean);
  EXPECT_FALSE(s.normalize);
  EXPECT_FALSE(s.matryoshka);
  // Matryoshka from config.json, or from --hf-overrides.
  std::ofstream(dir / "config.json") << R"({"architectures": ["Qwen3ForCausalLM"], "matryoshka_dimensions": [32, 64]})";
  s = resolve_pooling("pooling", "", dir.string());
  EXPECT_TRUE(s.matryoshka);
  EXPECT_EQ(s.matryoshka_dims, (std::vector<int>{32, 64}));
  std::ofstream(dir / "config.json") << R"({"architectures": ["Qwen3ForCausalLM"]})";
  s = resolve_pooling("pooling", "", dir.string(), R"({"is_matryoshka": true})");
  EXPECT_TRUE(s.matryoshka);
  EXPECT_TRUE(s.matryoshka_dims.empty());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace vireo
