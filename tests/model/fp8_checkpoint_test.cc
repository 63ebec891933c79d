// FP8 checkpoints (fp8_weights.h): the qwen3 fixture's linear weights quantized to E4M3 here, by an encoder
// written independently of the reader (nearest of the 127 finite positive codes, enumerated from the format's
// definition), in each scale layout vLLM reads; the model must give bitwise the logits of an F32 checkpoint
// holding the same dequantized values. Plus the FP8 decoders' special values and the refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/fp8.h"
#include "model/model.h"
#include "model_test_util.h"
#include "safetensors_util.h"

namespace vireo {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::RawTensor;

const fs::path kQwen3 = fs::path(VIREO_SOURCE_DIR) / "tests/fixtures/model/qwen3";

// E4M3FN's finite non-negative values by code (0x00 .. 0x7E): exponent field e (bias 7), mantissa m / 8.
std::vector<float> e4m3_codes() {
  std::vector<float> v;
  for (int code = 0; code < 0x7F; ++code) {
    const int e = code >> 3, m = code & 7;
    v.push_back(e == 0 ? static_cast<float>(m) / 8.f * std::pow(2.f, -6.f)
                       : (1.f + static_cast<float>(m) / 8.f) * std::pow(2.f, static_cast<float>(e - 7)));
  }
  return v;
}

uint8_t encode_e4m3(float x, const std::vector<float>& codes) {
  const float a = std::fabs(x);
  int best = 0;
  for (int c = 1; c < static_cast<int>(codes.size()); ++c)
    if (std::fabs(codes[c] - a) < std::fabs(codes[best] - a)) best = c;
  return static_cast<uint8_t>(best | (x < 0 ? 0x80 : 0));
}

float decode_e4m3(uint8_t b, const std::vector<float>& codes) { return (b & 0x80 ? -1.f : 1.f) * codes[b & 0x7F]; }

std::string bytes_of(const std::vector<float>& v) { return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4); }

enum class Scales { kBlocks, kChannelsBf16, kTensor };

struct Quantized {
  RawTensor weight, scale;
  std::vector<float> dequantized;
};

// w [rows, cols] F32 -> E4M3 with one scale per (br x bc) block (kBlocks), per row (kChannelsBf16: BF16
// [rows, 1]) or for the whole tensor (kTensor: a 0-d F32).
Quantized quantize(const RawTensor& w, Scales how, int64_t br, int64_t bc) {
  static const std::vector<float> codes = e4m3_codes();
  const int64_t rows = w.shape[0], cols = w.shape[1];
  std::vector<float> x(rows * cols);
  std::memcpy(x.data(), w.bytes.data(), x.size() * 4);
  if (how == Scales::kChannelsBf16) br = 1, bc = cols;
  if (how == Scales::kTensor) br = rows, bc = cols;
  const int64_t sr = (rows + br - 1) / br, sc = (cols + bc - 1) / bc;
  std::vector<float> scale(sr * sc);
  for (int64_t i = 0; i < sr; ++i)
    for (int64_t j = 0; j < sc; ++j) {
      float amax = 0;
      for (int64_t r = i * br; r < std::min(rows, (i + 1) * br); ++r)
        for (int64_t c = j * bc; c < std::min(cols, (j + 1) * bc); ++c) amax = std::max(amax, std::fabs(x[r * cols + c]));
      float s = amax > 0 ? amax / 448.f : 1.f;
      if (how == Scales::kChannelsBf16) s = bf16_to_f32(f32_to_bf16(s));
      scale[i * sc + j] = s;
    }
  Quantized q;
  q.weight = {"F8_E4M3", {rows, cols}, std::string(rows * cols, '\0')};
  q.dequantized.resize(rows * cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const float s = scale[(r / br) * sc + c / bc];
      const uint8_t b = encode_e4m3(x[r * cols + c] / s, codes);
      q.weight.bytes[r * cols + c] = static_cast<char>(b);
      q.dequantized[r * cols + c] = decode_e4m3(b, codes) * s;
    }
  if (how == Scales::kChannelsBf16) {
    std::string b(rows * 2, '\0');
    for (int64_t r = 0; r < rows; ++r) {
      const uint16_t h = f32_to_bf16(scale[r]);
      std::memcpy(&b[r * 2], &h, 2);
    }
    q.scale = {"BF16", {rows, 1}, b};
  } else if (how == Scales::kTensor) {
    q.scale = {"F32", {}, bytes_of(scale)};
  } else {
    q.scale = {"F32", {sr, sc}, bytes_of(scale)};
  }
  return q;
}

class Fp8Checkpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::path(::testing::TempDir()) / ("vireo_fp8_" + std::to_string(::getpid()) + "_" +
                                              ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(base_);
    fs::create_directories(base_ / "fp8");
    fs::create_directories(base_ / "ref");
    config_ = json::parse(std::ifstream(kQwen3 / "config.json"));
  }
  void TearDown() override { fs::remove_all(base_); }

  // Writes base_/fp8 (quantized linears, `quant` as quantization_config unless null) and base_/ref (F32,
  // the same values dequantized). `scale_suffix`: "_scale_inv" or "_scale".
  void write(Scales how, int64_t br, int64_t bc, const json& quant, const std::string& scale_suffix) {
    auto tensors = testing::read_safetensors(kQwen3 / "model.safetensors");
    std::map<std::string, RawTensor> fp8, ref;
    for (auto& [name, t] : tensors) {
      const bool linear = name.find("_proj.weight") != std::string::npos && t.shape.size() == 2;
      if (!linear) {
        fp8[name] = ref[name] = t;
        continue;
      }
      ASSERT_EQ(t.dtype, "F32") << name;
      Quantized q = quantize(t, how, br, bc);
      fp8[name] = q.weight;
      fp8[name + scale_suffix] = q.scale;
      if (how == Scales::kTensor) fp8[name.substr(0, name.size() - 6) + "input_scale"] = {"F32", {}, bytes_of({0.5f})};
      ref[name] = {"F32", t.shape, bytes_of(q.dequantized)};
      ++num_quantized_;
    }
    json cfg = config_;
    if (!quant.is_null()) cfg["quantization_config"] = quant;
    std::ofstream(base_ / "fp8" / "config.json") << cfg.dump();
    std::ofstream(base_ / "ref" / "config.json") << config_.dump();
    testing::write_safetensors(base_ / "fp8" / "model.safetensors", fp8);
    testing::write_safetensors(base_ / "ref" / "model.safetensors", ref);
  }

  void expect_same_logits() {
    ASSERT_GT(num_quantized_, 0);
    const std::vector<float> got = testing::prompt_logits((base_ / "fp8").string());
    const std::vector<float> want = testing::prompt_logits((base_ / "ref").string());
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(got, want);
    // And FP8 is not a no-op: the original weights give other logits.
    EXPECT_NE(got, testing::prompt_logits(kQwen3.string()));
  }

  std::string load_error() {
    try {
      testing::prompt_logits((base_ / "fp8").string());
    } catch (const Error& e) {
      return e.what();
    }
    ADD_FAILURE() << "loading succeeded";
    return "";
  }

  fs::path base_;
  json config_;
  int num_quantized_ = 0;
};

TEST(Fp8Values, DecodersFollowTheFormats) {
  EXPECT_EQ(fp8_e4m3_to_f32(0x00), 0.f);
  EXPECT_EQ(fp8_e4m3_to_f32(0x38), 1.f);
  EXPECT_EQ(fp8_e4m3_to_f32(0x7E), 448.f);
  EXPECT_EQ(fp8_e4m3_to_f32(0xFE), -448.f);
  EXPECT_EQ(fp8_e4m3_to_f32(0x01), std::ldexp(1.f, -9));  // the smallest subnormal
  EXPECT_EQ(fp8_e4m3_to_f32(0x08), std::ldexp(1.f, -6));  // the smallest normal
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_f32(0x7F)));
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_f32(0xFF)));
  const std::vector<float> codes = e4m3_codes();
  for (int b = 0; b < 256; ++b)
    if ((b & 0x7F) != 0x7F) EXPECT_EQ(fp8_e4m3_to_f32(static_cast<uint8_t>(b)), decode_e4m3(static_cast<uint8_t>(b), codes)) << b;
  EXPECT_EQ(fp8_e5m2_to_f32(0x3C), 1.f);
  EXPECT_EQ(fp8_e5m2_to_f32(0x7B), 57344.f);
  EXPECT_EQ(fp8_e5m2_to_f32(0x01), std::ldexp(1.f, -16));
  EXPECT_TRUE(std::isinf(fp8_e5m2_to_f32(0x7C)));
  EXPECT_TRUE(std::isnan(fp8_e5m2_to_f32(0x7D)));
}

// HF's fp8 (DeepSeek-V3, Qwen3-*-FP8): weight_scale_inv per block of weight_block_size; blocks that do not
// divide the matrices (48 x 40 over 64..128-wide ones) leave partial edge blocks.
TEST_F(Fp8Checkpoint, BlockScalesOfTheConfigsBlockSize) {
  write(Scales::kBlocks, 48, 40,
        {{"quant_method", "fp8"}, {"activation_scheme", "dynamic"}, {"fmt", "e4m3"}, {"weight_block_size", {48, 40}}},
        "_scale_inv");
  expect_same_logits();
}

// No quantization_config at all: F8 tensors are still found, blocks of 128 assumed (DeepSeek's).
TEST_F(Fp8Checkpoint, BlocksOf128WithoutAConfig) {
  write(Scales::kBlocks, 128, 128, nullptr, "_scale_inv");
  expect_same_logits();
}

// compressed-tensors (RedHat / neuralmagic FP8-dynamic): per-channel BF16 weight_scale [out, 1].
TEST_F(Fp8Checkpoint, CompressedTensorsChannelScales) {
  json q = {{"quant_method", "compressed-tensors"},
            {"format", "float-quantized"},
            {"ignore", {"lm_head"}},
            {"config_groups",
             {{"group_0",
               {{"targets", {"Linear"}},
                {"weights", {{"num_bits", 8}, {"type", "float"}, {"strategy", "channel"}, {"symmetric", true}}},
                {"input_activations", {{"num_bits", 8}, {"type", "float"}, {"strategy", "token"}, {"dynamic", true}}}}}}}};
  write(Scales::kChannelsBf16, 0, 0, q, "_scale");
  expect_same_logits();
}

// vLLM's own fp8 checkpoints: one weight_scale (and an input_scale, ignored) a tensor.
TEST_F(Fp8Checkpoint, PerTensorScales) {
  write(Scales::kTensor, 0, 0, {{"quant_method", "fp8"}, {"activation_scheme", "static"}}, "_scale");
  expect_same_logits();
}

TEST_F(Fp8Checkpoint, RefusesOtherMethodsAndBrokenScales) {
  write(Scales::kBlocks, 48, 40, {{"quant_method", "gptq"}, {"bits", 4}}, "_scale_inv");
  EXPECT_NE(load_error().find("quant_method 'gptq' is not supported"), std::string::npos);

  json cfg = json::parse(std::ifstream(base_ / "fp8" / "config.json"));
  cfg["quantization_config"] = {{"quant_method", "compressed-tensors"},
                                {"format", "pack-quantized"},
                                {"config_groups", {{"group_0", {{"weights", {{"num_bits", 4}, {"type", "int"}}}}}}}};
  std::ofstream(base_ / "fp8" / "config.json") << cfg.dump();
  EXPECT_NE(load_error().find("format 'pack-quantized' is not supported"), std::string::npos);
  cfg["quantization_config"]["format"] = "float-quantized";
  std::ofstream(base_ / "fp8" / "config.json") << cfg.dump();
  EXPECT_NE(load_error().find("4-bit int: not supported"), std::string::npos);

  // Blocks of 48 x 40 read as the config's 32 x 32: the scale shapes do not fit.
  cfg["quantization_config"] = {{"quant_method", "fp8"}, {"weight_block_size", {32, 32}}};
  std::ofstream(base_ / "fp8" / "config.json") << cfg.dump();
  const std::string e = load_error();
  EXPECT_NE(e.find("_scale_inv"), std::string::npos) << e;
  EXPECT_NE(e.find("blocks of 32 x 32"), std::string::npos) << e;

  // A weight without its scale.
  cfg["quantization_config"]["weight_block_size"] = {48, 40};
  std::ofstream(base_ / "fp8" / "config.json") << cfg.dump();
  auto t = testing::read_safetensors(base_ / "fp8" / "model.safetensors");
  t.erase("model.layers.1.mlp.down_proj.weight_scale_inv");
  testing::write_safetensors(base_ / "fp8" / "model.safetensors", t);
  EXPECT_NE(load_error().find("FP8 tensor 'model.layers.1.mlp.down_proj.weight' has no"), std::string::npos);
}

// --quantization fp8 on an FP8 checkpoint: its weights dequantized, then the projections quantized again
// per row (fp8_online_test.cc): the same as the flag on an F32 checkpoint of the dequantized values.
TEST_F(Fp8Checkpoint, QuantizationFlagRequantizesPerRow) {
  write(Scales::kBlocks, 48, 40, {{"quant_method", "fp8"}, {"weight_block_size", {48, 40}}}, "_scale_inv");
  LoadOptions opts;
  opts.quantization = "fp8";
  const std::vector<float> got = testing::prompt_logits((base_ / "fp8").string(), opts);
  EXPECT_EQ(got, testing::prompt_logits((base_ / "ref").string(), opts));
  EXPECT_NE(got, testing::prompt_logits((base_ / "ref").string()));
}

}  // namespace
}  // namespace vireo
