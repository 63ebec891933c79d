// --quantization fp8 on BF16 / F32 weights (vLLM's online FP8; decoder_fp8.cc): the layers' projections
// quantized per output row to E4M3 at load. The CPU keeps the codes (cpu_linear_fp8.cc), so the model
// must give the logits of an F32 checkpoint holding code x scale, quantized here by an encoder written
// apart from fp8.cc's (nearest of the enumerated codes, ties to the even code), up to fp32 summation order. Plus
// f32_to_fp8_e4m3 itself (the device kernels follow the same rounding) and the flag's rules.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "core/error.h"
#include "model/default_model.h"
#include "core/fp8.h"
#include "model/model.h"
#include "model_test_util.h"
#include "safetensors_util.h"

namespace vireo {
namespace {

namespace fs = std::filesystem;
using testing::RawTensor;

const fs::path kQwen3 = fs::path(VIREO_SOURCE_DIR) / "tests/fixtures/model/qwen3";

// The finite non-negative E4M3FN values by code 0x00 .. 0x7E, from the format's definition.
std::vector<double> codes() {
  std::vector<double> v;
  for (int c = 0; c < 0x7F; ++c) {
    const int e = c >> 3, m = c & 7;
    v.push_back(e == 0 ? m / 8.0 * std::ldexp(1.0, -6) : (1 + m / 8.0) * std::ldexp(1.0, e - 7));
  }
  return v;
}

// Nearest code (in double, so midpoints are exact), ties to the even code; past 448 saturates.
uint8_t reference_encode(float x) {
  static const std::vector<double> c = codes();
  const double a = std::fabs(static_cast<double>(x));
  int best = 0;
  for (int i = 1; i < static_cast<int>(c.size()); ++i) {
    const double d = std::fabs(c[i] - a), db = std::fabs(c[best] - a);
    if (d < db || (d == db && (i % 2) == 0)) best = i;
  }
  return static_cast<uint8_t>(best | (std::signbit(x) ? 0x80 : 0));
}

TEST(Fp8Encode, EveryCodeRoundTripsAndMidpointsGoToEven) {
  for (int b = 0; b < 256; ++b) {
    if ((b & 0x7F) == 0x7F) continue;
    EXPECT_EQ(f32_to_fp8_e4m3(fp8_e4m3_to_f32(static_cast<uint8_t>(b))), b) << b;
  }
  const std::vector<double> c = codes();
  for (int i = 0; i + 1 < static_cast<int>(c.size()); ++i) {
    const float mid = static_cast<float>((c[i] + c[i + 1]) / 2);  // exact: both codes have few bits
    ASSERT_EQ(static_cast<double>(mid), (c[i] + c[i + 1]) / 2);
    EXPECT_EQ(f32_to_fp8_e4m3(mid), i % 2 == 0 ? i : i + 1) << "between codes " << i << " and " << i + 1;
    EXPECT_EQ(f32_to_fp8_e4m3(std::nextafter(mid, 0.f)), i) << i;
    EXPECT_EQ(f32_to_fp8_e4m3(std::nextafter(mid, 1e9f)), i + 1) << i;
    EXPECT_EQ(f32_to_fp8_e4m3(-mid), (i % 2 == 0 ? i : i + 1) | 0x80) << i;
  }
  // Saturation (CUDA's __NV_SATFINITE), NaN, signed zero, below the smallest subnormal.
  EXPECT_EQ(f32_to_fp8_e4m3(448.f), 0x7E);
  EXPECT_EQ(f32_to_fp8_e4m3(463.f), 0x7E);
  EXPECT_EQ(f32_to_fp8_e4m3(1e30f), 0x7E);
  EXPECT_EQ(f32_to_fp8_e4m3(-std::numeric_limits<float>::infinity()), 0xFE);
  EXPECT_EQ(f32_to_fp8_e4m3(std::numeric_limits<float>::quiet_NaN()), 0x7F);
  EXPECT_EQ(f32_to_fp8_e4m3(-0.f), 0x80);
  EXPECT_EQ(f32_to_fp8_e4m3(std::ldexp(1.f, -11)), 0x00);  // a quarter of the smallest subnormal
  // Random values against the brute-force encoder.
  uint32_t s = 12345;
  for (int i = 0; i < 20000; ++i) {
    s = s * 1664525u + 1013904223u;
    const float v = std::ldexp(static_cast<float>(s >> 8) / (1 << 24) - 0.5f, static_cast<int>(s % 24) - 12);
    ASSERT_EQ(f32_to_fp8_e4m3(v), reference_encode(v)) << v;
  }
}

TEST(Fp8Encode, RowScalesPutEachRowsLargestValueOn448) {
  const std::vector<float> w = {1.f, -3.5f, 0.25f, 0.f, 0.f, 0.f, 0.f, 0.f, 2e-3f, 0.f, -1e-3f, 0.f};
  std::vector<uint8_t> q(12);
  std::vector<float> scale(3);
  fp8_quantize_rows(w.data(), 3, 4, q.data(), scale.data());
  EXPECT_EQ(scale[0], 3.5f / 448.f);
  EXPECT_EQ(scale[1], 1.f);  // an all-zero row
  EXPECT_EQ(scale[2], 2e-3f / 448.f);
  EXPECT_EQ(q[1], 0xFE);  // -448
  EXPECT_EQ(q[8], 0x7E);
  EXPECT_EQ(q[4], 0x00);
  // Codes of w x (1 / scale): the reciprocal rounded once a row, as the device kernels multiply.
  for (int i = 0; i < 12; ++i) EXPECT_EQ(q[i], reference_encode(w[i] * (1.f / scale[i / 4]))) << i;
}

class Fp8Online : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("vireo_fp8_online_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

// The fixture's q/k/v/o/gate/up/down weights rounded per row here; the lm_head and embeddings untouched.
TEST_F(Fp8Online, CpuComputesWithTheRowQuantizedWeights) {
  auto tensors = testing::read_safetensors(kQwen3 / "model.safetensors");
  int quantized = 0;
  for (auto& [name, t] : tensors) {
    if (name.find("_proj.weight") == std::string::npos || t.shape.size() != 2) continue;
    ASSERT_EQ(t.dtype, "F32") << name;
    const int64_t rows = t.shape[0], cols = t.shape[1];
    std::vector<float> x(rows * cols);
    std::memcpy(x.data(), t.bytes.data(), x.size() * 4);
    for (int64_t r = 0; r < rows; ++r) {
      float amax = 0;
      for (int64_t c = 0; c < cols; ++c) amax = std::max(amax, std::fabs(x[r * cols + c]));
      const float s = amax > 0 ? amax / 448.f : 1.f;
      for (int64_t c = 0; c < cols; ++c) {
        const uint8_t b = reference_encode(x[r * cols + c] / s);
        x[r * cols + c] = static_cast<float>(codes()[b & 0x7F]) * (b & 0x80 ? -1.f : 1.f) * s;
      }
    }
    t.bytes.assign(reinterpret_cast<const char*>(x.data()), x.size() * 4);
    ++quantized;
  }
  ASSERT_EQ(quantized, 2 * 7);  // two layers of q, k, v, o, gate, up, down
  fs::copy(kQwen3 / "config.json", dir_ / "config.json");
  testing::write_safetensors(dir_ / "model.safetensors", tensors);
  LoadOptions fp8;
  fp8.quantization = "fp8";
  const std::vector<float> got = testing::prompt_logits(kQwen3.string(), fp8);
  const std::vector<float> want = testing::prompt_logits(dir_.string()), plain = testing::prompt_logits(kQwen3.string());
  ASSERT_EQ(got.size(), want.size());
  // The FP8 GEMV sums code x x and scales once; the F32 checkpoint's path multiplies by code x scale.
  EXPECT_LT(testing::rel_max_err(got.data(), want.data(), want.size()), 1e-4);
  EXPECT_GT(testing::rel_max_err(plain.data(), want.data(), want.size()), 1e-3);  // the rounding shows
}

TEST_F(Fp8Online, DummyWeightsQuantizeAndCompressedTensorsNeedsAnFp8Checkpoint) {
  const ModelConfig cfg = default_model_config();
  LoadOptions plain, fp8;
  plain.load_format = fp8.load_format = "dummy";
  fp8.quantization = "fp8";
  auto logits = [&](const LoadOptions& o) {
    auto model = load_model(cfg, "", create_backend("cpu"), o);
    KvCache kv = model->allocate_kv_cache(4, 16);
    testing::SeqDriver d{*model, kv, testing::contiguous_table(4)};
    std::vector<float> l = d.step({5, 17, 300, 2, 9, 41, 77, 8}, true);
    model->free_kv_cache(kv);
    return l;
  };
  const std::vector<float> a = logits(plain), b = logits(fp8);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_NE(a, b);
  for (float v : b) ASSERT_TRUE(std::isfinite(v));
  // E4M3 keeps 3 mantissa bits: a few percent of noise on each weight, not a different model.
  EXPECT_LT(testing::rel_max_err(b.data(), a.data(), a.size()), 0.25);
  LoadOptions ct = fp8;
  ct.quantization = "compressed-tensors";
  EXPECT_THROW(load_model(cfg, "", create_backend("cpu"), ct), Error);
  LoadOptions ct_ckpt;
  ct_ckpt.quantization = "compressed-tensors";
  try {
    testing::prompt_logits(kQwen3.string(), ct_ckpt);
    ADD_FAILURE() << "compressed-tensors loaded a checkpoint without FP8 weights";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("holds no FP8 weights"), std::string::npos) << e.what();
  }
}

// Every family fixture with --quantization fp8 on the CPU, through a 12-token prefill (dequantized bands)
// and two decode steps (the FP8 GEMV): projections of every layout (fused q/k/v and gate/up, biases, MLA,
// Gated DeltaNet, MoE shared experts) load as codes or stay dense by their widths, and the model stays the
// same model: finite logits close to the unquantized ones.
TEST(Fp8OnlineFamilies, EveryFixtureRunsPrefillAndDecode) {
  const fs::path root = fs::path(VIREO_SOURCE_DIR) / "tests/fixtures/model";
  int ran = 0;
  for (const auto& entry : fs::directory_iterator(root)) {
    if (!fs::exists(entry.path() / "config.json")) continue;
    SCOPED_TRACE(entry.path().filename().string());
    auto run = [&](const LoadOptions& o) { return testing::prefill_and_two_decodes(entry.path().string(), o); };
    std::vector<float> plain;
    try {
      plain = run(LoadOptions{});
    } catch (const Error&) {
      std::printf("skip %s\n", entry.path().filename().c_str());
      continue;  // a fixture that needs more than a plain text load (e.g. its own test's options)
    }
    LoadOptions fp8;
    fp8.quantization = "fp8";
    const std::vector<float> q = run(fp8);
    ASSERT_EQ(q.size(), plain.size());
    for (float v : q) ASSERT_TRUE(std::isfinite(v));
    // Tiny random models have flat logits; E4M3's rounding moves them by a few percent, never wholesale.
    EXPECT_LT(testing::rel_max_err(q.data(), plain.data(), plain.size()), 0.5);
    ++ran;
  }
  EXPECT_GE(ran, 30);
}

}  // namespace
}  // namespace vireo
