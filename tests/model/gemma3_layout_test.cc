// Gemma3ForConditionalGeneration checkpoints come in two layouts: the hub's files (google/gemma-3-4b-it ...)
// and transformers 5.17's save_pretrained (the gemma3_vl fixture) hold the text model under
// language_model.model.*, transformers 5's modules name it model.language_model.* (what Qwen3.5 checkpoints
// use). Both must load to the same model (the fixture, renamed).
#include <gtest/gtest.h>

#include <filesystem>

#include "backend/backend.h"
#include "model/model.h"
#include "model_test_util.h"
#include "safetensors_util.h"

namespace vireo {
namespace {

namespace fs = std::filesystem;

const fs::path kFixture = fs::path(VIREO_SOURCE_DIR) / "tests/fixtures/model/gemma3_vl";


TEST(Gemma3Layout, HubAndTransformersFiveNamesLoadAlike) {
  if (!fs::exists(kFixture / "reference.json")) GTEST_SKIP() << "fixture gemma3_vl not generated";
  const fs::path dir = fs::path(::testing::TempDir()) / ("vireo_gemma3_v5_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(kFixture / "config.json", dir / "config.json");
  std::map<std::string, testing::RawTensor> renamed;
  int moved = 0;
  for (auto& [name, t] : testing::read_safetensors(kFixture / "model.safetensors")) {
    const std::string from = "language_model.model.";
    if (name.rfind(from, 0) == 0) {
      renamed["model.language_model." + name.substr(from.size())] = t;
      ++moved;
    } else {
      renamed[name] = t;  // the vision tower and projector, ignored either way
    }
  }
  ASSERT_GT(moved, 10);
  testing::write_safetensors(dir / "model.safetensors", renamed);
  EXPECT_EQ(testing::prompt_logits(dir.string()), testing::prompt_logits(kFixture.string()));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace vireo
