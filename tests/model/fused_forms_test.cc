// The model's fused linear forms at every step size (Backend::prefers_fused_linear: the norm in the
// projection's prologue, the residual add in its epilogue) and SiLU-and-mul in the down projection's
// prologue (Backend::prefers_silu_mul_input), as CUDA chooses them for FP8 weights above the GEMV's rows:
// on the CPU, a backend that prefers both everywhere must give the logits of the plain CPU backend, which
// takes the separate ops above 4 rows, for every family fixture (and the qwen3 fixture with FP8 weights).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "core/error.h"
#include "forwarding_backend.h"
#include "model/model.h"
#include "model_test_util.h"

namespace vireo {
namespace {

namespace fs = std::filesystem;

class FusedEverywhereBackend final : public testing::ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  bool prefers_fused_linear(DType, int64_t) const override { return true; }
  bool prefers_silu_mul_input(DType, int64_t) const override { return true; }
};

// Every position's logits of a 12-token prompt, then a 6-token chunk and a decode step, on `backend`.
std::vector<float> run(const fs::path& dir, std::unique_ptr<Backend> backend, const LoadOptions& o) {
  auto model = load_model(dir.string(), std::move(backend), o);
  KvCache kv = model->allocate_kv_cache(8, 16);
  testing::SeqDriver d{*model, kv, testing::contiguous_table(8)};
  std::vector<float> out = d.step({5, 17, 300, 2, 9, 41, 77, 8, 8, 100, 3, 250}, true);
  for (float v : d.step({42, 7, 19, 3, 3, 60}, true)) out.push_back(v);
  for (float v : d.step({11})) out.push_back(v);
  model->free_kv_cache(kv);
  return out;
}

void expect_same_logits(const fs::path& dir, const LoadOptions& o, const std::vector<float>& plain) {
  const std::vector<float> fused = run(dir, std::make_unique<FusedEverywhereBackend>(create_backend("cpu")), o);
  ASSERT_EQ(fused.size(), plain.size());
  for (float v : fused) ASSERT_TRUE(std::isfinite(v));
  // The same ops in another order of roundings (e.g. the residual added before or after rounding the
  // projection): F32 activations on the CPU keep that far below 1e-4 of the logits' scale.
  EXPECT_LT(testing::rel_max_err(fused.data(), plain.data(), plain.size()), 1e-4);
}

TEST(FusedForms, EveryFixtureGivesTheSeparateOpsLogits) {
  const fs::path root = fs::path(VIREO_SOURCE_DIR) / "tests/fixtures/model";
  int ran = 0;
  for (const auto& entry : fs::directory_iterator(root)) {
    if (!fs::exists(entry.path() / "config.json")) continue;
    SCOPED_TRACE(entry.path().filename().string());
    std::vector<float> plain;
    try {
      plain = run(entry.path(), create_backend("cpu"), LoadOptions{});
    } catch (const Error&) {
      continue;  // a fixture that needs more than a plain text load (its own test's options)
    }
    expect_same_logits(entry.path(), LoadOptions{}, plain);
    ++ran;
  }
  EXPECT_GE(ran, 30);
}

TEST(FusedForms, Fp8WeightsGiveTheSeparateOpsLogits) {
  LoadOptions o;
  o.quantization = "fp8";
  const fs::path dir = fs::path(VIREO_SOURCE_DIR) / "tests/fixtures/model/qwen3";
  expect_same_logits(dir, o, run(dir, create_backend("cpu"), o));
}

}  // namespace
}  // namespace vireo
