// GPT-OSS: GptOssConfig's defaults, the built-in 20B shape, MXFP4 dequantization, and MXFP4 experts
// loading like their dense form (the gpt_oss fixture's experts quantized, and the same values written
// dense in the [E, in, out] layout): dequantized at load (LoadOptions::dequantize_mxfp4) bitwise the same
// logits, kept packed (the default) the same up to fp32 summation order; a GGUF with MXFP4 experts (gate
// and up apart or fused) bitwise like the HF MXFP4 checkpoint in either form; dummy MXFP4 experts packed
// and dequantized alike; and the loader's errors for malformed MXFP4 tensors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "core/error.h"
#include "model/default_model.h"
#include "model/model_config.h"
#include "model/mxfp4.h"
#include "model_test_util.h"
#include "../gguf_util/hf_to_gguf.h"
#include "safetensors_util.h"

namespace vireo {
namespace {

namespace fs = std::filesystem;

TEST(GptOssConfig, AbsentFieldsTakeTheConfigClassDefaults) {
  ModelConfig c = ModelConfig::from_json({{"architectures", {"GptOssForCausalLM"}}, {"model_type", "gpt_oss"}}, "t");
  EXPECT_EQ(c.num_hidden_layers, 36);
  EXPECT_EQ(c.num_experts, 128);
  EXPECT_EQ(c.num_experts_per_tok, 4);
  EXPECT_EQ(c.moe_intermediate_size, 2880);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_TRUE(c.attention_sinks);
  EXPECT_FLOAT_EQ(c.swiglu_alpha, 1.702f);
  EXPECT_FLOAT_EQ(c.swiglu_limit, 7.0f);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-5f);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.layer_window(0), 128);  // even layers slide
  EXPECT_EQ(c.layer_window(1), 0);
  EXPECT_EQ(c.rope_scaling.type, "yarn");
  EXPECT_FLOAT_EQ(c.rope_scaling.factor, 32.0f);
  EXPECT_FALSE(c.rope_scaling.truncate);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 4096);
  EXPECT_FLOAT_EQ(c.rope_theta, 150000.0f);
  for (int l = 0; l < c.num_hidden_layers; ++l) EXPECT_TRUE(c.moe_layer(l)) << l;
}

TEST(GptOssConfig, GivenFieldsWin) {
  ModelConfig c = ModelConfig::from_json({{"architectures", {"GptOssForCausalLM"}},
                                          {"num_hidden_layers", 3},
                                          {"layer_types", {"full_attention", "sliding_attention", "full_attention"}},
                                          {"sliding_window", 16},
                                          {"swiglu_limit", 3.5},
                                          {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 5000.0}}}},
                                         "t");
  EXPECT_EQ(c.layer_window(0), 0);
  EXPECT_EQ(c.layer_window(1), 16);
  EXPECT_FLOAT_EQ(c.swiglu_limit, 3.5f);
  EXPECT_EQ(c.rope_scaling.type, "default");
  EXPECT_FLOAT_EQ(c.rope_theta, 5000.0f);
}

TEST(GptOssConfig, BuiltinTwentyBIsTheHubShape) {
  ModelConfig c = builtin_model_config("gpt-oss-20b");
  EXPECT_EQ(c.architecture, "GptOssForCausalLM");
  EXPECT_EQ(c.num_hidden_layers, 24);
  EXPECT_EQ(c.num_experts, 32);
  EXPECT_EQ(c.vocab_size, 201088);
  EXPECT_EQ(c.layer_window(0), 128);
  EXPECT_EQ(c.layer_window(23), 0);
}

TEST(GptOssConfig, BuiltinOneTwentyBIsTheHubShape) {
  ModelConfig c = builtin_model_config("gpt-oss-120b");
  EXPECT_EQ(c.architecture, "GptOssForCausalLM");
  EXPECT_EQ(c.num_hidden_layers, 36);
  EXPECT_EQ(c.num_experts, 128);
  EXPECT_EQ(c.num_experts_per_tok, 4);
  EXPECT_EQ(c.hidden_size, 2880);
  EXPECT_EQ(c.moe_intermediate_size, 2880);
  EXPECT_EQ(c.layer_window(34), 128);
  EXPECT_EQ(c.layer_window(35), 0);
  EXPECT_FLOAT_EQ(c.swiglu_limit, 7.0f);
}

TEST(Mxfp4, DequantizesNibblesWithTheBlockScale) {
  uint8_t blocks[16] = {}, scales[1] = {128};  // 2^1
  blocks[0] = 0x21;                            // element 0: 1 -> 0.5, element 1: 2 -> 1.0
  blocks[1] = 0xF7;                            // element 2: 7 -> 6.0, element 3: 15 -> -6.0
  blocks[15] = 0x9A;                           // element 30: 10 -> -1.0, element 31: 9 -> -0.5
  float out[32];
  mxfp4_dequantize(blocks, scales, 1, 1, out);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], 2.0f);
  EXPECT_EQ(out[2], 12.0f);
  EXPECT_EQ(out[3], -12.0f);
  EXPECT_EQ(out[4], 0.0f);
  EXPECT_EQ(out[30], -2.0f);
  EXPECT_EQ(out[31], -1.0f);
}

// One [rows, cols] matrix quantized per 32 columns: blocks, scales, and the values they decode to.
struct Quantized {
  std::string blocks, scales;
  std::vector<float> values;
};
Quantized quantize(const std::vector<float>& m, int64_t rows, int64_t cols) {
  static constexpr float kE2M1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  Quantized q;
  q.values.resize(m.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t g = 0; g < cols / 32; ++g) {
      float mx = 0;
      for (int i = 0; i < 32; ++i) mx = std::max(mx, std::fabs(m[r * cols + g * 32 + i]));
      const int e = mx > 0 ? static_cast<int>(std::ceil(std::log2(mx / 6.0f))) : 0;
      q.scales.push_back(static_cast<char>(e + 127));
      uint8_t nib[32];
      for (int i = 0; i < 32; ++i) {
        const float v = m[r * cols + g * 32 + i] / std::ldexp(1.0f, e);
        int best = 0;
        for (int j = 1; j < 8; ++j)
          if (std::fabs(std::fabs(v) - kE2M1[j]) < std::fabs(std::fabs(v) - kE2M1[best])) best = j;
        nib[i] = static_cast<uint8_t>(best | (v < 0 ? 8 : 0));
        q.values[r * cols + g * 32 + i] = std::ldexp((v < 0 ? -1.0f : 1.0f) * kE2M1[best], e);
      }
      for (int j = 0; j < 16; ++j) q.blocks.push_back(static_cast<char>(nib[2 * j] | (nib[2 * j + 1] << 4)));
    }
  return q;
}

std::vector<float> floats(const testing::RawTensor& t) {
  std::vector<float> v(t.bytes.size() / 4);
  std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
  return v;
}

const fs::path kFixture = fs::path(VIREO_SOURCE_DIR) / "tests/fixtures/model/gpt_oss";

// The fixture's experts quantized to MXFP4: as a checkpoint with *_blocks / *_scales (k = 1) or with the
// dequantized values written dense in the [E, in, out] layout (k = 0), in root/{mxfp4,dense}.
void write_quantized_checkpoints(const fs::path& root) {
  auto t = testing::read_safetensors(kFixture / "model.safetensors");
  std::map<std::string, testing::RawTensor> packed = t, dense = t;
  int converted = 0;
  for (auto& [name, x] : t) {
    const bool gate_up = name.size() > 12 && name.compare(name.size() - 12, 12, "gate_up_proj") == 0;
    const bool down = name.size() > 9 && name.compare(name.size() - 9, 9, "down_proj") == 0;
    if (!gate_up && !down) continue;
    ASSERT_EQ(x.dtype, "F32");
    const int64_t E = x.shape[0], in = x.shape[1], out = x.shape[2];  // [E, in, out]
    ASSERT_EQ(in % 32, 0) << name;
    std::vector<float> w = floats(x), outmajor(w.size()), back(w.size());
    for (int64_t e = 0; e < E; ++e)
      for (int64_t i = 0; i < in; ++i)
        for (int64_t o = 0; o < out; ++o) outmajor[(e * out + o) * in + i] = w[(e * in + i) * out + o];
    Quantized q = quantize(outmajor, E * out, in);
    for (int64_t e = 0; e < E; ++e)
      for (int64_t i = 0; i < in; ++i)
        for (int64_t o = 0; o < out; ++o) back[(e * in + i) * out + o] = q.values[(e * out + o) * in + i];
    dense[name].bytes.assign(reinterpret_cast<const char*>(back.data()), back.size() * 4);
    packed.erase(name);
    packed[name + "_blocks"] = {"U8", {E, out, in / 32, 16}, q.blocks};
    packed[name + "_scales"] = {"U8", {E, out, in / 32}, q.scales};
    ++converted;
  }
  ASSERT_GT(converted, 0);
  for (int k = 0; k < 2; ++k) {
    const fs::path dir = root / (k ? "mxfp4" : "dense");
    fs::create_directories(dir);
    fs::copy_file(kFixture / "config.json", dir / "config.json");
    testing::write_safetensors(dir / "model.safetensors", k ? packed : dense);
  }
}

fs::path temp_root(const std::string& what) {
  return fs::path(::testing::TempDir()) / ("vireo_gpt_oss_" + what + "_" + std::to_string(::getpid()));
}

LoadOptions dequantized() {
  LoadOptions o;
  o.dequantize_mxfp4 = true;
  return o;
}

// Greedy tokens of every prompt position, then 6 decode steps (each its own one-token step: the decode
// GEMV path of the packed experts).
std::vector<int32_t> greedy_tokens(const std::string& path, const LoadOptions& opts) {
  auto model = load_model(path, create_backend("cpu"), opts);
  const int64_t V = model->config().vocab_size;
  KvCache kv = model->allocate_kv_cache(8, 16);
  testing::SeqDriver d{*model, kv, testing::contiguous_table(8)};
  const std::vector<float> prompt = d.step({5, 17, 300, 2, 9, 41, 77, 8, 8, 100, 3, 250}, true);
  std::vector<int32_t> tokens;
  for (size_t r = 0; r < prompt.size() / V; ++r) tokens.push_back(testing::argmax(&prompt[r * V], V));
  for (int i = 0; i < 6; ++i) {
    const std::vector<float> next = d.step({tokens.back()});
    tokens.push_back(testing::argmax(next.data(), V));
  }
  model->free_kv_cache(kv);
  return tokens;
}

// Packed logits within 1e-4 of the dequantized ones (relative to the largest), and the same greedy tokens.
void expect_close(const std::vector<float>& packed, const std::vector<float>& dense) {
  ASSERT_EQ(packed.size(), dense.size());
  EXPECT_LT(testing::rel_max_err(packed.data(), dense.data(), dense.size()), 1e-4);
}

TEST(GptOssCheckpoint, Mxfp4ExpertsDequantizedLoadLikeTheirDenseForm) {
  if (!fs::exists(kFixture / "model.safetensors")) GTEST_SKIP() << "no gpt_oss fixture";
  const fs::path root = temp_root("st");
  write_quantized_checkpoints(root);
  const std::vector<float> dense = testing::prompt_logits((root / "dense").string());
  const std::vector<float> mxfp4 = testing::prompt_logits((root / "mxfp4").string(), dequantized());
  fs::remove_all(root);
  EXPECT_EQ(dense, mxfp4);
  EXPECT_NE(dense, testing::prompt_logits(kFixture.string()));  // the quantization changed something
}

TEST(GptOssCheckpoint, Mxfp4ExpertsKeptPackedRunLikeTheirDenseForm) {
  if (!fs::exists(kFixture / "model.safetensors")) GTEST_SKIP() << "no gpt_oss fixture";
  const fs::path root = temp_root("packed");
  write_quantized_checkpoints(root);
  const std::string dense = (root / "dense").string(), mxfp4 = (root / "mxfp4").string();
  const std::vector<float> want = testing::prompt_logits(dense), got = testing::prompt_logits(mxfp4);
  EXPECT_NE(got, want);  // packed: not the dequantized path (the summation order differs)
  expect_close(got, want);
  EXPECT_EQ(greedy_tokens(mxfp4, {}), greedy_tokens(dense, {}));
  fs::remove_all(root);
}

// llama.cpp's gpt-oss GGUF (convert_hf_to_gguf.py's GptOssModel: experts split into ffn_{gate,up,down}_exps
// in MXFP4, ggml's block layout; or gate and up fused into ffn_gate_up_exps) gives bitwise the logits of the
// HF MXFP4 checkpoint of the same values: kept packed (the blocks repacked into the HF layout, so the same
// bytes through the same kernels) and dequantized at load.
TEST(GptOssCheckpoint, Mxfp4GgufLoadsLikeTheHfMxfp4Checkpoint) {
  if (!fs::exists(kFixture / "model.safetensors")) GTEST_SKIP() << "no gpt_oss fixture";
  const fs::path root = temp_root("gguf");
  write_quantized_checkpoints(root);
  const std::string hf = (root / "mxfp4").string();
  const std::vector<float> want_packed = testing::prompt_logits(hf);
  const std::vector<float> want_dequantized = testing::prompt_logits(hf, dequantized());
  for (bool fuse : {false, true}) {
    SCOPED_TRACE(fuse ? "ffn_gate_up_exps" : "ffn_gate_exps + ffn_up_exps");
    testing::ConvertOptions o;
    o.type = testing::kGgmlF32;
    o.expert_type = testing::kGgmlMXFP4;
    o.fuse_gate_up_exps = fuse;
    const std::string gguf = (root / (fuse ? "gpt_oss_mxfp4_fused.gguf" : "gpt_oss_mxfp4.gguf")).string();
    testing::convert_model_fixture(kFixture.string(), gguf, o);
    EXPECT_EQ(testing::prompt_logits(gguf), want_packed);
    EXPECT_EQ(testing::prompt_logits(gguf, dequantized()), want_dequantized);
  }
  fs::remove_all(root);
}

// Dummy weights (no checkpoint): MXFP4 experts, as the released checkpoints have, the same random values
// packed and dequantized (so VIREO_MXFP4=dequantize is an A/B of one model).
TEST(GptOssCheckpoint, DummyMxfp4ExpertsPackedAndDequantizedAgree) {
  const ModelConfig c = ModelConfig::from_file((kFixture / "config.json").string());
  LoadOptions packed;
  packed.load_format = "dummy";
  packed.seed = 3;
  LoadOptions dense = packed;
  dense.dequantize_mxfp4 = true;
  auto logits = [&](const LoadOptions& o) {
    auto model = load_model(c, "", create_backend("cpu"), o);
    KvCache kv = model->allocate_kv_cache(4, 16);
    testing::SeqDriver d{*model, kv, testing::contiguous_table(4)};
    std::vector<float> l = d.step({5, 17, 300, 2, 9, 41}, true);
    model->free_kv_cache(kv);
    return l;
  };
  const std::vector<float> a = logits(packed), b = logits(dense);
  EXPECT_NE(a, b);
  expect_close(a, b);
}

// Dummy experts whose widths are not multiples of 32 cannot be MXFP4: dense random values instead.
TEST(GptOssCheckpoint, DummyExpertsOfOtherWidthsAreDense) {
  nlohmann::json j = nlohmann::json::parse(std::ifstream(kFixture / "config.json"));
  j["intermediate_size"] = 40;
  const ModelConfig c = ModelConfig::from_json(j, "t");
  LoadOptions o;
  o.load_format = "dummy";
  auto model = load_model(c, "", create_backend("cpu"), o);
  KvCache kv = model->allocate_kv_cache(4, 16);
  testing::SeqDriver d{*model, kv, testing::contiguous_table(4)};
  const std::vector<float> l = d.step({5, 17, 300});
  for (float v : l) ASSERT_TRUE(std::isfinite(v));
  model->free_kv_cache(kv);
}

// An MXFP4 checkpoint whose blocks or scales have the wrong shape or type, or lack one of the two, fails
// to load with an error naming the tensor.
TEST(GptOssCheckpoint, MalformedMxfp4ExpertsAreRejected) {
  if (!fs::exists(kFixture / "model.safetensors")) GTEST_SKIP() << "no gpt_oss fixture";
  const fs::path root = temp_root("bad");
  write_quantized_checkpoints(root);
  const auto good = testing::read_safetensors(root / "mxfp4" / "model.safetensors");
  const std::string scales = "model.layers.1.mlp.experts.down_proj_scales";
  ASSERT_TRUE(good.count(scales));
  auto error_of = [&](const std::map<std::string, testing::RawTensor>& tensors, const LoadOptions& opts) {
    fs::remove_all(root / "bad");
    fs::create_directories(root / "bad");
    fs::copy_file(kFixture / "config.json", root / "bad" / "config.json");
    testing::write_safetensors(root / "bad" / "model.safetensors", tensors);
    try {
      load_model((root / "bad").string(), create_backend("cpu"), opts);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("loaded");
  };
  for (const LoadOptions& opts : {LoadOptions{}, dequantized()}) {
    auto missing = good;
    missing.erase(scales);
    EXPECT_NE(error_of(missing, opts).find(scales), std::string::npos) << error_of(missing, opts);
    auto wrong_shape = good;
    testing::RawTensor& t = wrong_shape[scales];
    t.shape = {t.shape[0], t.shape[1] / 2, t.shape[2] * 2};
    EXPECT_NE(error_of(wrong_shape, opts).find(scales), std::string::npos) << error_of(wrong_shape, opts);
    auto wrong_type = good;
    wrong_type[scales].dtype = "I8";
    EXPECT_NE(error_of(wrong_type, opts).find("down_proj"), std::string::npos) << error_of(wrong_type, opts);
  }
  fs::remove_all(root);
}

}  // namespace
}  // namespace vireo
