// GGUF models against their safetensors originals: each tiny fixture is converted at test time
// (tests/gguf_util/hf_to_gguf.h does what convert_hf_to_gguf.py does, Q/K permutation included)
// and must give the same logits (bitwise for F32 and BF16-from-BF16, close for F16/BF16/Q8_0)
// and the same greedy tokens. Broken model files fail with a vireo::Error naming the tensor.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "../gguf_util/hf_to_gguf.h"
#include "backend/backend.h"
#include "core/error.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_dequant.h"
#include "model/gguf_config.h"
#include "model/gguf_weights.h"
#include "model/model.h"
#include "model_test_util.h"

namespace vireo {
namespace {

namespace fs = std::filesystem;
using testing::ConvertOptions;

std::string fixture_dir(const std::string& name) { return std::string(VIREO_SOURCE_DIR) + "/tests/fixtures/model/" + name; }

fs::path temp_dir() {
  fs::path d = fs::path(::testing::TempDir()) / ("vireo_gguf_model_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

struct ModelRun {
  std::vector<float> logits;   // every prompt position [n, V]
  std::vector<int32_t> greedy;  // 8 greedy tokens after the prompt
};

ModelRun run_model(const std::string& path, const std::string& device = "cpu", const LoadOptions& lo = {}) {
  auto model = load_model(path, create_backend(device), lo);
  const int64_t V = model->config().vocab_size;
  const nlohmann::json ref = testing::read_json(fixture_dir("qwen3") + "/reference.json");
  std::vector<int32_t> prompt = ref["prompts"][1].get<std::vector<int32_t>>();
  for (auto& t : prompt) t %= static_cast<int32_t>(V);
  KvCache kv = model->allocate_kv_cache(8, 16);
  testing::SeqDriver d{*model, kv, testing::contiguous_table(8)};
  ModelRun r;
  r.logits = d.step(prompt, true);
  r.greedy.push_back(testing::argmax(r.logits.data() + r.logits.size() - V, V));
  while (r.greedy.size() < 8) {
    auto lg = d.step({r.greedy.back()});
    r.greedy.push_back(testing::argmax(lg.data(), V));
  }
  model->free_kv_cache(kv);
  return r;
}

struct Case {
  std::string fixture;
  uint32_t type;
  double tol;  // max |a - b| / max |b| of the logits; 0: bitwise
  bool same_greedy = true;  // 4-bit weights move the fixtures' near-flat top tokens: logits only
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.fixture << " as ggml type " << c.type; }

class GgufParity : public ::testing::TestWithParam<Case> {};

TEST_P(GgufParity, SameLogitsAndGreedyAsSafetensors) {
  const Case& c = GetParam();
  const std::string gguf = (temp_dir() / (c.fixture + "_" + std::to_string(c.type) + ".gguf")).string();
  ConvertOptions o;
  o.type = c.type;
  o.version = c.type == testing::kGgmlF16 ? 2 : 3;   // both versions load
  o.alignment = c.type == testing::kGgmlBF16 ? 64 : 32;  // general.alignment is honoured
  testing::convert_model_fixture(fixture_dir(c.fixture), gguf, o);
  const ModelRun want = run_model(fixture_dir(c.fixture));
  const ModelRun got = run_model(gguf);
  ASSERT_EQ(got.logits.size(), want.logits.size());
  if (c.tol == 0) {
    EXPECT_EQ(got.logits, want.logits);
  } else {
    const double err = testing::rel_max_err(got.logits.data(), want.logits.data(), want.logits.size());
    EXPECT_LT(err, c.tol);
    std::printf("%s as ggml type %u: relative logits error %.2e\n", c.fixture.c_str(), c.type, err);
  }
  if (c.same_greedy) EXPECT_EQ(got.greedy, want.greedy);
  fs::remove(gguf);
}

// llama3 carries its RoPE scaling as the rope_freqs tensor (divisors of inv_freq), which rounds
// differently from transformers' formula by an ulp: near, not bitwise.
INSTANTIATE_TEST_SUITE_P(
    Fixtures, GgufParity,
    ::testing::Values(Case{"qwen3", testing::kGgmlF32, 0}, Case{"qwen2", testing::kGgmlF32, 0},
                      Case{"olmo2", testing::kGgmlF32, 0}, Case{"llama_yarn_bias", testing::kGgmlF32, 0},
                      Case{"llama3", testing::kGgmlF32, 1e-5}, Case{"qwen3_bf16_sharded", testing::kGgmlBF16, 0},
                      Case{"qwen3", testing::kGgmlF16, 2e-3}, Case{"llama3", testing::kGgmlBF16, 2e-2},
                      Case{"qwen3", testing::kGgmlQ8_0, 5e-2}, Case{"llama_yarn_bias", testing::kGgmlQ8_0, 5e-2},
                      // IQ4_NL (llama.cpp's 4-bit codebook; the writer's unrefined quantizer): 4-bit weights
                      // put ~16x Q8_0's error on the logits (0.37 measured), so the logits' bound alone
                      Case{"qwen3", testing::kGgmlIQ4_NL, 0.5, false},
                      Case{"olmo2", testing::kGgmlQ8_0, 5e-2}, Case{"qwen3_moe", testing::kGgmlF32, 0},
                      Case{"qwen3_moe", testing::kGgmlF16, 2e-3}, Case{"mixtral", testing::kGgmlF32, 0},
                      Case{"qwen2_moe", testing::kGgmlF32, 0}, Case{"gemma3", testing::kGgmlF32, 0},
                      // The gemma3 fixture amplifies weight rounding ~8x more than qwen3's (F16: 6.4e-3 vs
                      // 8.2e-4): four norms a layer whose 1 + w is ~2, and embeddings times sqrt(hidden).
                      Case{"gemma3", testing::kGgmlF16, 1e-2}, Case{"gemma3", testing::kGgmlQ8_0, 0.15},
                      // gemma2's logits are soft-capped at 2 (its fixture): the same absolute Q8_0 error is a
                      // larger share of the capped range (greedy tokens still equal).
                      Case{"gemma2", testing::kGgmlF32, 0}, Case{"gemma2", testing::kGgmlF16, 1e-2},
                      Case{"gemma2", testing::kGgmlQ8_0, 0.25},
                      // Phi-3: fused attn_qkv / ffn_up, LongRoPE as rope_factors_{long,short} tensors
                      Case{"phi3", testing::kGgmlF32, 0}, Case{"phi3", testing::kGgmlQ8_0, 5e-2},
                      // GPT-OSS: attn_sinks, ffn_gate_inp with a bias, ffn_{gate,up,down}_exps with biases
                      Case{"gpt_oss", testing::kGgmlF32, 0},
                      // HunYuan dense: the NTK-alpha RoPE base baked into rope.freq_base as an f32 (HF keeps it
                      // a double), so near, not bitwise; LFM2: per-layer head_count_kv, shortconv.* tensors
                      Case{"hunyuan_dense", testing::kGgmlF32, 1e-4}, Case{"hunyuan_dense", testing::kGgmlQ8_0, 5e-2},
                      Case{"hunyuan_moe", testing::kGgmlF32, 1e-4}, Case{"ernie4_5", testing::kGgmlF32, 0},
                      Case{"ernie4_5", testing::kGgmlQ8_0, 5e-2}, Case{"ernie4_5_moe", testing::kGgmlF32, 0},
                      // olmoe: OLMo-2's full-width q/k norms in pre-norm layers, experts feed_forward_length wide
                      Case{"olmoe", testing::kGgmlF32, 0}, Case{"olmoe", testing::kGgmlQ8_0, 5e-2},
                      // exaone4: post-norms, sliding layers by the pattern flags, the global layer without RoPE,
                      // llama3 RoPE scaling as rope_freqs (an ulp off transformers' formula, as llama3's)
                      Case{"exaone4", testing::kGgmlF32, 1e-5}, Case{"exaone4", testing::kGgmlQ8_0, 5e-2},
                      // glm4: GPT-J RoPE over half of each head, q/k/v biases, fused [gate; up], sandwich norms
                      Case{"glm4", testing::kGgmlF32, 0}, Case{"glm4", testing::kGgmlQ8_0, 5e-2},
                      Case{"lfm2", testing::kGgmlF32, 0}, Case{"lfm2", testing::kGgmlQ8_0, 5e-2},
                      // lfm2moe (the sigmoid router's exp_probs_b, leading dense layer), glm4moe (q/k/v biases,
                      // half rotary, DeepSeek router keys), seed_oss (q/k/v biases without o_proj's)
                      // (glm4_moe's fixture has near-ties its Q8_0 rounding flips: F32 only)
                      Case{"lfm2_moe", testing::kGgmlF32, 0}, Case{"glm4_moe", testing::kGgmlF32, 0},
                      Case{"seed_oss", testing::kGgmlF32, 0},
                      Case{"seed_oss", testing::kGgmlQ8_0, 5e-2},
                      // deepseek2: kv_b_proj rebuilt from attn_k_b / attn_v_b, exp_probs_b, the group keys.
                      // V2-Lite's fixture has rms_norm_eps 1e-5, which llama.cpp also uses for the q_a / kv_a
                      // norms where transformers' DeepseekV2 keeps 1e-6 (the released V2 configs say 1e-6)
                      Case{"deepseek_v3", testing::kGgmlF32, 0}, Case{"deepseek_v2_lite", testing::kGgmlF32, 1e-3},
                      // qwen3next / qwen35 / qwen35moe: the DeltaNet tensors put back (qkvz split, value heads
                      // tiled in qwen35, A_log stored as -exp(A_log): log(-x) gives it back within an ulp)
                      Case{"qwen3_next", testing::kGgmlF32, 1e-5}, Case{"qwen3_5", testing::kGgmlF32, 1e-5},
                      // (the DeltaNet amplifies weight rounding ~6x more than qwen3's layers: F16 4.8e-3 vs 8.2e-4;
                      // Q8_0 moves greedy tokens here, and the other two fixtures have 48-wide rows)
                      Case{"qwen3_5_moe", testing::kGgmlF32, 1e-5}, Case{"qwen3_5", testing::kGgmlF16, 1e-2}),
    [](const ::testing::TestParamInfo<Case>& i) {
      return i.param.fixture + "_" + std::to_string(i.param.type);
    });

// The GGUF path on the CUDA backend (skipped without a GPU): an F32 GGUF carries the safetensors
// fixture's exact values, so both load to the same BF16 device weights and give bitwise the same logits
// and tokens on the GPU; a Q8_0 file, dequantized at load, stays near its CPU run (bf16 vs fp32 math).
TEST(GgufOnCuda, SameLogitsAsSafetensorsOnCuda) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
  for (const char* name : {"qwen3", "qwen2", "olmo2", "llama_yarn_bias", "qwen3_moe", "mixtral", "qwen2_moe", "gemma3", "gemma2",
                           "phi3", "gpt_oss", "hunyuan_dense", "lfm2", "deepseek_v3", "qwen3_next", "qwen3_5"}) {
    const std::string gguf = (temp_dir() / (std::string(name) + "_cuda.gguf")).string();
    ConvertOptions o;
    o.type = testing::kGgmlF32;
    testing::convert_model_fixture(fixture_dir(name), gguf, o);
    const ModelRun want = run_model(fixture_dir(name), "cuda");
    const ModelRun got = run_model(gguf, "cuda");
    EXPECT_EQ(got.logits, want.logits) << name;
    EXPECT_EQ(got.greedy, want.greedy) << name;
    fs::remove(gguf);
  }
  const std::string q8 = (temp_dir() / "qwen3_q8_cuda.gguf").string();
  ConvertOptions o;
  o.type = testing::kGgmlQ8_0;
  testing::convert_model_fixture(fixture_dir("qwen3"), q8, o);
  const ModelRun cpu = run_model(q8, "cpu"), gpu = run_model(q8, "cuda");
  ASSERT_EQ(gpu.logits.size(), cpu.logits.size());
  const double err = testing::rel_max_err(gpu.logits.data(), cpu.logits.data(), cpu.logits.size());
  std::printf("qwen3 Q8_0 GGUF, CUDA vs CPU: relative logits error %.2e\n", err);
  EXPECT_LT(err, 5e-2);
  fs::remove(q8);
}

TEST(GgufModel, ConfigFromMetadata) {
  const std::string gguf = (temp_dir() / "cfg_llama3.gguf").string();
  testing::convert_model_fixture(fixture_dir("llama3"), gguf);
  ModelConfig c = gguf_model_config(GgufShards(gguf));
  ModelConfig want = ModelConfig::from_file(fixture_dir("llama3") + "/config.json");
  EXPECT_EQ(c.architecture, "LlamaForCausalLM");
  EXPECT_EQ(c.vocab_size, want.vocab_size);  // from the token list
  EXPECT_EQ(c.hidden_size, want.hidden_size);
  EXPECT_EQ(c.num_key_value_heads, want.num_key_value_heads);
  EXPECT_EQ(c.head_dim, want.head_dim);
  EXPECT_EQ(c.max_position_embeddings, want.max_position_embeddings);
  EXPECT_EQ(c.tie_word_embeddings, false);
  EXPECT_EQ(c.rope_scaling.freq_factors.size(), static_cast<size_t>(want.head_dim / 2));
  testing::convert_model_fixture(fixture_dir("qwen3"), gguf);
  EXPECT_TRUE(gguf_model_config(GgufShards(gguf)).tie_word_embeddings);  // no output.weight
  fs::remove(gguf);
}

// A Gemma 3 file as llama.cpp's converter writes it carries no layer order and no softmax scale: vireo
// follows llama.cpp's rules (every 6th layer global, local RoPE base 10,000, 1/sqrt(head_dim), and
// 1/sqrt(hidden / heads) for the 62-layer 27B).
TEST(GgufModel, Gemma3DefaultsAsLlamaCpp) {
  const std::string gguf = (temp_dir() / "gemma3_defaults.gguf").string();
  for (int layers : {8, 62}) {
    testing::GgufWriter w;
    const std::string a = "gemma3";
    w.add_string("general.architecture", a);
    w.add_u32(a + ".context_length", 4096);
    w.add_u32(a + ".embedding_length", 5376);
    w.add_u32(a + ".block_count", static_cast<uint32_t>(layers));
    w.add_u32(a + ".feed_forward_length", 21504);
    w.add_u32(a + ".attention.head_count", 32);
    w.add_u32(a + ".attention.head_count_kv", 16);
    w.add_u32(a + ".attention.key_length", 128);
    w.add_u32(a + ".attention.value_length", 128);
    w.add_u32(a + ".attention.sliding_window", 1024);
    w.add_f32(a + ".rope.freq_base", 1e6f);
    w.add_string(a + ".rope.scaling.type", "linear");
    w.add_f32(a + ".rope.scaling.factor", 8.0f);
    w.add_u32(a + ".vocab_size", 1000);
    w.write(gguf);
    ModelConfig c = gguf_model_config(GgufShards(gguf));
    EXPECT_EQ(c.architecture, "Gemma3ForCausalLM");
    EXPECT_EQ(c.hidden_act, "gelu_pytorch_tanh");
    EXPECT_FLOAT_EQ(c.attention_scale, 1.0f / std::sqrt(layers == 62 ? 168.0f : 128.0f)) << layers;
    EXPECT_FLOAT_EQ(c.rope_local_theta, 10000.0f);
    EXPECT_EQ(c.rope_scaling.type, "linear");
    for (int l = 0; l < layers; ++l) {
      EXPECT_EQ(c.layer_window(l), (l + 1) % 6 ? 1024 : 0) << l;
      EXPECT_EQ(c.local_rope_layer(l), (l + 1) % 6 != 0) << l;
    }
  }
  fs::remove(gguf);
}

// A Gemma 2 file as llama.cpp's converter writes it (gemma-2-27b's shape: 46 layers, hidden 4608 / 32 heads
// of 128): every other layer slides, soft-capping from its keys (absent: 50 / 30), 1/sqrt(head_dim) and
// 1/sqrt(hidden / heads) for the 27B.
// Gemma (1) files: the llama3 fixture's weights under a GemmaForCausalLM config (zero-centred norms,
// scaled embeddings, GELU-tanh), converted as convert_hf_to_gguf.py's GemmaModel does (norms as 1 + w, no
// Q/K permutation): bitwise the safetensors model's logits.
TEST(GgufModel, GemmaOneAsSafetensors) {
  const fs::path dir = temp_dir() / "gemma1_hf";
  fs::create_directories(dir);
  nlohmann::json cfg = testing::read_json(fixture_dir("llama3") + "/config.json");
  cfg["architectures"] = {"GemmaForCausalLM"};
  cfg["model_type"] = "gemma";
  cfg.erase("rope_parameters");
  cfg["rope_theta"] = 10000.0;
  cfg["hidden_activation"] = "gelu_pytorch_tanh";
  std::ofstream(dir / "config.json") << cfg.dump();
  fs::copy_file(fixture_dir("llama3") + "/model.safetensors", dir / "model.safetensors", fs::copy_options::overwrite_existing);
  const std::string gguf = (temp_dir() / "gemma1.gguf").string();
  ConvertOptions o;
  o.type = testing::kGgmlF32;
  testing::convert_model_fixture(dir.string(), gguf, o);
  const ModelRun want = run_model(dir.string());
  const ModelRun got = run_model(gguf);
  EXPECT_EQ(load_model(gguf, create_backend("cpu"), LoadOptions{})->config().architecture, "GemmaForCausalLM");
  EXPECT_EQ(got.logits, want.logits);
  EXPECT_EQ(got.greedy, want.greedy);
  // Not a Llama in disguise: the same weights as LlamaForCausalLM give other logits.
  EXPECT_NE(run_model(fixture_dir("llama3")).logits, want.logits);
  fs::remove_all(dir);
  fs::remove(gguf);
}

TEST(GgufModel, Gemma2DefaultsAsLlamaCpp) {
  const std::string gguf = (temp_dir() / "gemma2_defaults.gguf").string();
  for (int layers : {8, 46}) {
    testing::GgufWriter w;
    const std::string a = "gemma2";
    w.add_string("general.architecture", a);
    w.add_u32(a + ".context_length", 8192);
    w.add_u32(a + ".embedding_length", 4608);
    w.add_u32(a + ".block_count", static_cast<uint32_t>(layers));
    w.add_u32(a + ".feed_forward_length", 36864);
    w.add_u32(a + ".attention.head_count", 32);
    w.add_u32(a + ".attention.head_count_kv", 16);
    w.add_u32(a + ".attention.key_length", 128);
    w.add_u32(a + ".attention.value_length", 128);
    w.add_u32(a + ".attention.sliding_window", 4096);
    w.add_f32(a + ".rope.freq_base", 10000.0f);
    if (layers == 46) w.add_f32(a + ".attn_logit_softcapping", 40.0f);
    w.add_u32(a + ".vocab_size", 1000);
    w.write(gguf);
    ModelConfig c = gguf_model_config(GgufShards(gguf));
    EXPECT_EQ(c.architecture, "Gemma2ForCausalLM");
    EXPECT_EQ(c.hidden_act, "gelu_pytorch_tanh");
    EXPECT_FLOAT_EQ(c.attention_scale, 1.0f / std::sqrt(layers == 46 ? 144.0f : 128.0f)) << layers;
    EXPECT_FLOAT_EQ(c.attn_logit_softcapping, layers == 46 ? 40.0f : 50.0f);
    EXPECT_FLOAT_EQ(c.final_logit_softcapping, 30.0f);
    EXPECT_FLOAT_EQ(c.rope_local_theta, 0.0f);
    for (int l = 0; l < layers; ++l) EXPECT_EQ(c.layer_window(l), l % 2 == 0 ? 4096 : 0) << l;
  }
  fs::remove(gguf);
}

// Q8_0 files keep their linear weights packed on the CPU (cpu_linear_blocks.cc): the same logits as the
// file dequantized at load (LoadOptions::dequantize_gguf) up to float summation order, and the same greedy
// tokens; tied (qwen3, lfm2) and untied heads, llama's permuted Q/K rows, Phi-3's fused projections, biases,
// MoE experts (ffn_gate_exps / ffn_up_exps interleaved per expert, down) beside shared experts and MLA
// (whose own projections are dequantized). Rows that are not whole blocks are written F32 by the converter.
TEST(GgufModel, PackedQ8_0MatchesDequantized) {
  for (const std::string fixture : {"qwen3", "llama3", "phi3", "lfm2", "qwen2", "qwen2_moe", "qwen3_moe", "deepseek_v3", "lfm2_moe", "glm4_moe", "seed_oss"}) {
    const std::string gguf = (temp_dir() / (fixture + "_packed.gguf")).string();
    ConvertOptions o;
    o.type = testing::kGgmlQ8_0;
    testing::convert_model_fixture(fixture_dir(fixture), gguf, o);
    LoadOptions dequantized;
    dequantized.dequantize_gguf = true;
    ::testing::internal::CaptureStderr();
    const ModelRun got = run_model(gguf);
    const std::string log = ::testing::internal::GetCapturedStderr();
    const ModelRun want = run_model(gguf, "cpu", dequantized);
    EXPECT_NE(log.find("weight matrices kept in their block types"), std::string::npos) << fixture << ": " << log;
    if (fixture == "qwen3_moe") std::printf("%s", log.c_str());
    ASSERT_EQ(got.logits.size(), want.logits.size());
    const double err = testing::rel_max_err(got.logits.data(), want.logits.data(), want.logits.size());
    EXPECT_LT(err, 1e-5) << fixture;
    EXPECT_EQ(got.greedy, want.greedy) << fixture;
    std::printf("%s Q8_0 packed vs dequantized: relative logits error %.2e\n", fixture.c_str(), err);
    fs::remove(gguf);
  }
}

// A tensor of 2^21 values is read by several threads in chunks; the result must equal a plain
// one-thread dequantization.
TEST(GgufModel, LargeTensorReadInParallelChunks) {
  const int64_t rows = 8192, row = 256;
  std::vector<float> x(rows * row);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.001f * i) * (1 + i % 7);
  const std::string q8 = testing::encode_values(x.data(), rows * row, testing::kGgmlQ8_0);
  const std::string p = (temp_dir() / "large.gguf").string();
  testing::GgufWriter w;
  w.add_tensor("token_embd.weight", {row, rows}, testing::kGgmlQ8_0, q8);
  w.write(p);
  ModelConfig c;
  c.architecture = "Qwen3ForCausalLM";
  GgufWeights weights(std::make_unique<GgufShards>(p), c);
  std::vector<uint16_t> got(rows * row);
  weights.read("model.embed_tokens.weight", {rows, row}, DType::kBF16, got.data());
  std::vector<float> want(rows * row);
  for (int64_t b = 0; b < rows * row / 32; ++b)
    dequantize(testing::kGgmlQ8_0, reinterpret_cast<const uint8_t*>(q8.data()) + b * 34, want.data() + b * 32, 32);
  for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], f32_to_bf16(want[i])) << i;
  fs::remove(p);
}

// Rewrites the qwen3 fixture's GGUF with one change and expects load_model to fail naming `what`.
void expect_load_error(const std::function<void(testing::GgufWriter&)>& extra, const std::string& drop,
                       const std::string& what, const std::string& load_format = "auto") {
  const std::string src = (temp_dir() / "ok.gguf").string(), bad = (temp_dir() / "bad.bin").string();
  testing::convert_model_fixture(fixture_dir("qwen3"), src);
  GgufFile f(src);
  testing::GgufWriter w;
  testing::copy_metadata(f, w);
  for (const auto& t : f.tensors())
    if (t.name != drop)
      w.add_tensor(t.name, t.ne, t.type, std::string(reinterpret_cast<const char*>(f.tensor_data(t)), t.nbytes));
  extra(w);
  w.write(bad);  // no .gguf extension: found by its magic
  LoadOptions opts;
  opts.load_format = load_format;
  try {
    load_model(bad, create_backend("cpu"), opts);
    ADD_FAILURE() << "loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

TEST(GgufModel, BadModelsFailNamingTheTensor) {
  auto none = [](testing::GgufWriter&) {};
  expect_load_error(none, "blk.1.ffn_up.weight", "missing tensor 'blk.1.ffn_up.weight' (for model.layers.1.mlp.up_proj.weight)");
  expect_load_error(
      [](testing::GgufWriter& w) { w.add_tensor("blk.1.ffn_up.weight", {64, 128}, 9, std::string(128 * 2 * 36, '\0')); },
      "blk.1.ffn_up.weight", "tensor 'blk.1.ffn_up.weight' has type Q8_1, which Vireo cannot load");
  expect_load_error(
      [](testing::GgufWriter& w) { w.add_tensor("blk.0.ffn_up.weight", {64, 64}, 0, std::string(64 * 64 * 4, '\0')); },
      "blk.0.ffn_up.weight", "tensor 'blk.0.ffn_up.weight' has shape [64, 64], expected [128, 64]");
  expect_load_error(none, "", "a GGUF file cannot be loaded with --load-format safetensors", "safetensors");
  try {
    load_model(fixture_dir("qwen3"), create_backend("cpu"), LoadOptions{.load_format = "gguf"});
    ADD_FAILURE() << "loaded a directory as GGUF";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--load-format gguf: '" + fixture_dir("qwen3") + "' is a directory"),
              std::string::npos)
        << e.what();
  }
}

// gguf-split shards: --model names the first, the others are found next to it.
TEST(GgufModel, SplitFilesLoadLikeOne) {
  const std::string one = (temp_dir() / "whole.gguf").string();
  testing::convert_model_fixture(fixture_dir("llama3"), one);
  const auto shards = testing::split_gguf(one, (temp_dir() / "llama3-q").string(), 3);
  const ModelRun want = run_model(one), got = run_model(shards[0]);
  EXPECT_EQ(got.logits, want.logits);
  EXPECT_EQ(got.greedy, want.greedy);
  auto expect = [](const std::string& path, const std::string& what) {
    try {
      load_model(path, create_backend("cpu"), LoadOptions{});
      ADD_FAILURE() << "loaded " << path;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  expect(shards[1], "this is shard 2 of 3; pass the first one, " + shards[0]);
  fs::remove(shards[2]);
  expect(shards[0], shards[2] + ": shard 3 of 3 of " + shards[0] + " is missing");
  for (const auto& p : shards) fs::remove(p);
  fs::remove(one);
}

// deepseek2 files from before April 2025 hold kv_b_proj as one attn_kv_b (and the per-head key / value
// lengths without the *_mla keys): the same model.
TEST(GgufModel, DeepseekLegacyKvB) {
  const std::string gguf = (temp_dir() / "deepseek_v3_legacy.gguf").string();
  ConvertOptions o;
  o.deepseek_legacy_kv_b = true;
  testing::convert_model_fixture(fixture_dir("deepseek_v3"), gguf, o);
  EXPECT_FALSE(GgufFile(gguf).find("deepseek2.attention.key_length_mla"));
  EXPECT_TRUE(GgufFile(gguf).find_tensor("blk.0.attn_kv_b.weight"));
  const ModelRun want = run_model(fixture_dir("deepseek_v3")), got = run_model(gguf);
  EXPECT_EQ(got.logits, want.logits);
  EXPECT_EQ(got.greedy, want.greedy);
  fs::remove(gguf);
}

// Qwen3-Next files from converters before the in_proj_qkvz split hold it whole as ssm_in.
TEST(GgufModel, Qwen3NextLegacySsmIn) {
  const std::string gguf = (temp_dir() / "qwen3_next_legacy.gguf").string();
  ConvertOptions o;
  o.qwen3_next_legacy = true;
  testing::convert_model_fixture(fixture_dir("qwen3_next"), gguf, o);
  EXPECT_TRUE(GgufFile(gguf).find_tensor("blk.0.ssm_in.weight"));
  const ModelRun want = run_model(fixture_dir("qwen3_next")), got = run_model(gguf);
  ASSERT_EQ(got.logits.size(), want.logits.size());
  EXPECT_LT(testing::rel_max_err(got.logits.data(), want.logits.data(), want.logits.size()), 1e-5);
  EXPECT_EQ(got.greedy, want.greedy);
  fs::remove(gguf);
}

// YaRN (factor 4, mscale_all_dim 1) as llama.cpp runs deepseek2: RoPE magnitude 1, softmax scale
// mscale^2 / sqrt(qk_head_dim) from rope.scaling.yarn_log_multiplier, RoPE on consecutive pairs. The
// fixture's checkpoint rotates halves (rope_interleave false), which a GGUF cannot say; with that
// overridden to pairs the safetensors model is the GGUF's. Also q_proj without q_lora, two shared experts.
TEST(GgufModel, DeepseekYarnAsLlamaCpp) {
  const std::string gguf = (temp_dir() / "deepseek_v3_qproj.gguf").string();
  testing::convert_model_fixture(fixture_dir("deepseek_v3_qproj"), gguf, ConvertOptions{});
  LoadOptions pairs;
  pairs.hf_overrides = {{"rope_interleave", true}};
  const ModelRun want = run_model(fixture_dir("deepseek_v3_qproj"), "cpu", pairs), got = run_model(gguf);
  ASSERT_EQ(got.logits.size(), want.logits.size());
  const double err = testing::rel_max_err(got.logits.data(), want.logits.data(), want.logits.size());
  EXPECT_LT(err, 1e-5);  // the multiplier is stored as 0.1f * mscale_all_dim: ~1e-8 off
  EXPECT_EQ(got.greedy, want.greedy);
  const ModelRun halves = run_model(fixture_dir("deepseek_v3_qproj"));  // the checkpoint as it is differs
  EXPECT_GT(testing::rel_max_err(halves.logits.data(), want.logits.data(), want.logits.size()), 1e-3);
  fs::remove(gguf);
}

// Q4_K_M files give attn_v a different block type than attn_q / attn_k: on the CPU the three stay packed
// apart (each linear writes its columns of qkv) instead of being dequantized into one fused weight. The
// llama3 (permuted Q/K rows) and qwen2 (q/k/v biases) fixtures as Q8_0 files with attn_v rewritten as Q4_0:
// packed against dequantized, the same logits up to summation order and the same greedy tokens.
TEST(GgufModel, MixedTypeQkvStaysPackedApart) {
  for (const std::string fixture : {"llama3", "qwen2"}) {
    const std::string q8 = (temp_dir() / (fixture + "_q8.gguf")).string(), mixed = (temp_dir() / (fixture + "_mixed.gguf")).string();
    ConvertOptions o;
    o.type = testing::kGgmlQ8_0;
    testing::convert_model_fixture(fixture_dir(fixture), q8, o);
    {
      GgufFile f(q8);
      testing::GgufWriter w;
      testing::copy_metadata(f, w);
      for (const auto& t : f.tensors()) {
        const bool v = t.name.find("attn_v.weight") != std::string::npos;
        if (!v) {
          w.add_tensor(t.name, t.ne, t.type, std::string(reinterpret_cast<const char*>(f.tensor_data(t)), t.nbytes));
          continue;
        }
        std::vector<float> x(static_cast<size_t>(t.numel()));
        dequantize(t.type, f.tensor_data(t), x.data(), t.numel());
        w.add_tensor(t.name, t.ne, testing::kGgmlQ4_0, testing::encode_values(x.data(), t.numel(), testing::kGgmlQ4_0));
      }
      w.write(mixed);
    }
    LoadOptions dequantized;
    dequantized.dequantize_gguf = true;
    ::testing::internal::CaptureStderr();
    const ModelRun got = run_model(mixed);
    const std::string log = ::testing::internal::GetCapturedStderr();
    const ModelRun want = run_model(mixed, "cpu", dequantized);
    EXPECT_NE(log.find("Q4_0"), std::string::npos) << log;
    EXPECT_EQ(log.find("fused weights dequantized"), std::string::npos) << log;
    const double err = testing::rel_max_err(got.logits.data(), want.logits.data(), want.logits.size());
    EXPECT_LT(err, 1e-5) << fixture;
    EXPECT_EQ(got.greedy, want.greedy) << fixture;
    std::printf("%s Q8_0 q/k + Q4_0 v packed apart vs dequantized: relative logits error %.2e\n", fixture.c_str(), err);
    fs::remove(q8);
    fs::remove(mixed);
  }
}

// SmolLM3 as llama.cpp runs it: Llama's tensors (Q/K rows permuted back) and no RoPE on every 4th layer,
// a step llama.cpp hard-codes (the fixture's own interval is 2): the safetensors model with no_rope_layers
// overridden to that step gives the same logits (F32: bitwise) and greedy tokens; the fixture as it is differs.
TEST(GgufModel, SmolLM3NoRopeEveryFourthLayer) {
  const std::string gguf = (temp_dir() / "smollm3.gguf").string();
  testing::convert_model_fixture(fixture_dir("smollm3"), gguf, ConvertOptions{});
  LoadOptions step4;
  step4.hf_overrides = {{"no_rope_layers", {1, 1, 1, 0}}};
  const ModelRun want = run_model(fixture_dir("smollm3"), "cpu", step4), got = run_model(gguf);
  ASSERT_EQ(got.logits.size(), want.logits.size());
  EXPECT_EQ(got.logits, want.logits);
  EXPECT_EQ(got.greedy, want.greedy);
  const ModelRun step2 = run_model(fixture_dir("smollm3"));
  EXPECT_GT(testing::rel_max_err(step2.logits.data(), want.logits.data(), want.logits.size()), 1e-3);
  fs::remove(gguf);
}

// OLMo 3: the olmo2 fixture as an Olmo3 checkpoint (layer 0 sliding over 4 keys) gives the logits of the
// OLMo-2 model with that window, not those without; its GGUF (arch olmo2 with sliding_window_pattern, as
// convert_hf_to_gguf.py's Olmo2Model writes OLMo 3) the same.
TEST(GgufModel, Olmo3SlidingLayersAsOlmo2Files) {
  const fs::path dir = temp_dir() / "olmo3";
  fs::create_directories(dir);
  nlohmann::json cfg = testing::read_json(fixture_dir("olmo2") + "/config.json");
  cfg["architectures"] = {"Olmo3ForCausalLM"};
  cfg["model_type"] = "olmo3";
  cfg["sliding_window"] = 4;
  cfg["layer_types"] = {"sliding_attention", "full_attention"};
  std::ofstream(dir / "config.json") << cfg.dump();
  fs::copy_file(fixture_dir("olmo2") + "/model.safetensors", dir / "model.safetensors", fs::copy_options::overwrite_existing);
  LoadOptions windowed;
  windowed.hf_overrides = {{"sliding_window", 4}, {"layer_types", {"sliding_attention", "full_attention"}}};
  const ModelRun want = run_model(fixture_dir("olmo2"), "cpu", windowed), got = run_model(dir.string());
  EXPECT_EQ(got.logits, want.logits);
  EXPECT_NE(got.logits, run_model(fixture_dir("olmo2")).logits);
  const std::string gguf = (temp_dir() / "olmo3.gguf").string();
  testing::convert_model_fixture(dir.string(), gguf);
  EXPECT_EQ(run_model(gguf).logits, want.logits);
  EXPECT_EQ(run_model(gguf).greedy, want.greedy);
  fs::remove(gguf);
  fs::remove_all(dir);
}

// EXAONE 4.0 with sliding layers other than Exaone4Config's default pattern (every 4th layer global): the
// exaone4 fixture's weights with layer_types [full, sliding, sliding, full] and no sliding_window_pattern.
// Its GGUF (attention.sliding_window_pattern flags, as convert_hf_to_gguf.py's Exaone4Model writes them)
// gives the safetensors model's logits; the fixture's own layout (3 sliding, 1 global) does not.
TEST(GgufModel, Exaone4SlidingLayersFromTheFlags) {
  const fs::path dir = temp_dir() / "exaone4_flags";
  fs::create_directories(dir);
  nlohmann::json cfg = testing::read_json(fixture_dir("exaone4") + "/config.json");
  cfg.erase("sliding_window_pattern");
  cfg["layer_types"] = {"full_attention", "sliding_attention", "sliding_attention", "full_attention"};
  std::ofstream(dir / "config.json") << cfg.dump();
  fs::copy_file(fixture_dir("exaone4") + "/model.safetensors", dir / "model.safetensors",
                fs::copy_options::overwrite_existing);
  const std::string gguf = (temp_dir() / "exaone4_flags.gguf").string();
  testing::convert_model_fixture(dir.string(), gguf);
  const ModelRun want = run_model(dir.string()), got = run_model(gguf);
  ASSERT_EQ(got.logits.size(), want.logits.size());
  EXPECT_LT(testing::rel_max_err(got.logits.data(), want.logits.data(), want.logits.size()), 1e-5);
  const ModelRun fixture = run_model(fixture_dir("exaone4"));
  EXPECT_GT(testing::rel_max_err(fixture.logits.data(), want.logits.data(), want.logits.size()), 1e-3);
  fs::remove(gguf);
  fs::remove_all(dir);
}

// Qwen3-VL's text GGUFs (arch qwen3vl / qwen3vlmoe) and Qwen2-VL / Qwen2.5-VL's (qwen2vl): Qwen3's,
// Qwen3-MoE's and Qwen2's tensors and keys under another name; the same logits as the plain files.
TEST(GgufModel, VlTextFilesAreTheirTextModels) {
  for (auto [fixture, arch] : {std::pair{"qwen3", "qwen3vl"}, std::pair{"qwen3_moe", "qwen3vlmoe"},
                               std::pair{"qwen2", "qwen2vl"}}) {
    SCOPED_TRACE(arch);
    const std::string plain = (temp_dir() / "plain.gguf").string(), vl = (temp_dir() / "vl.gguf").string();
    testing::convert_model_fixture(fixture_dir(fixture), plain);
    ConvertOptions o;
    o.arch = arch;
    testing::convert_model_fixture(fixture_dir(fixture), vl, o);
    EXPECT_EQ(run_model(vl).logits, run_model(plain).logits);
    fs::remove(plain);
    fs::remove(vl);
  }
}

TEST(GgufModel, UnsupportedArchitecture) {
  const std::string p = (temp_dir() / "phi2.gguf").string();
  testing::GgufWriter w;
  w.add_string("general.architecture", "phi2");
  w.write(p);
  try {
    load_model(p, create_backend("cpu"), LoadOptions{});
    ADD_FAILURE();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("general.architecture 'phi2' is not supported (supported: llama, qwen2, qwen3, "), std::string::npos)
        << msg;
    for (const char* a : {"gemma3", "gpt-oss", "granitemoe", "hunyuan-dense", "lfm2", "deepseek2", "qwen3next", "qwen35moe"})
      EXPECT_NE(msg.find(std::string(", ") + a), std::string::npos) << a << " missing from: " << msg;
  }
}

}  // namespace
}  // namespace vireo
