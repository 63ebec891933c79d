// --override-generation-config: sampling defaults over --generation-config's (auto: the model folder's
// generation_config.json; vllm: none), as vLLM merges them; bad JSON is refused.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/error.h"
#include "engine/llm.h"
#include "model/model_config.h"
#include "tokenizer/default_dir.h"

namespace vireo {
namespace {

namespace fs = std::filesystem;

EngineConfig config(const std::string& base, const std::string& override_json) {
  EngineConfig c;
  c.model = (fs::path(VIREO_SOURCE_DIR) / "tests/fixtures/model/qwen3").string();
  c.tokenizer = default_tokenizer_dir();
  c.device = "cpu";
  c.max_model_len = 128;
  c.max_num_seqs = 4;
  c.generation_config = base;
  c.override_generation_config = override_json;
  return c;
}

TEST(GenerationOverride, MergedOverTheModelsOrAlone) {
  if (!fs::exists(fs::path(default_tokenizer_dir()) / "tokenizer.json")) GTEST_SKIP() << "models/qwen3 missing";
  {
    LLM llm(config("auto", R"({"temperature": 0.3, "top_k": 5, "repetition_penalty": 1.1})"));
    const GenerationConfig& g = llm.engine().generation_config();
    EXPECT_FLOAT_EQ(g.temperature.value_or(-1), 0.3f);
    EXPECT_EQ(g.top_k.value_or(-1), 5);
    EXPECT_FLOAT_EQ(g.repetition_penalty.value_or(-1), 1.1f);
    EXPECT_EQ(g.eos_token_ids, std::vector<int32_t>{2});  // the folder's generation_config.json stays
  }
  {
    LLM llm(config("vllm", R"({"top_p": 0.9})"));
    const GenerationConfig& g = llm.engine().generation_config();
    EXPECT_FLOAT_EQ(g.top_p.value_or(-1), 0.9f);
    EXPECT_FALSE(g.temperature.has_value());
    EXPECT_TRUE(g.eos_token_ids.empty());
  }
  EXPECT_THROW(LLM(config("auto", "[1]")), Error);
  EXPECT_THROW(LLM(config("auto", R"({"top_k": "five"})")), Error);
}

}  // namespace
}  // namespace vireo
