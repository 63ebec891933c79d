// End to end through AsyncEngine::create with a GGUF file as --model: the built-in default
// model's shapes written as qwen3 metadata plus the Qwen3 tokenizer as tokenizer.ggml.*, weights
// from --load-format dummy (seeded by HF name, so equal to the built-in model's). Tokenizer, chat
// template and greedy outputs must equal the built-in model with models/qwen3.
#include <gtest/gtest.h>

#include <filesystem>

#include "../gguf_util/hf_to_gguf.h"
#include "engine/async_engine.h"
#include "engine/llm.h"
#include "tokenizer/default_dir.h"
#include "tokenizer/tokenizer.h"

namespace vireo {
namespace {

namespace fs = std::filesystem;

EngineConfig config(const std::string& model) {
  EngineConfig c;
  c.model = model;
  c.device = "cpu";
  c.max_model_len = 256;
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = 256;
  if (model != "default") c.load_format = "dummy";
  return c;
}

// builtin:default (model/default_model.cc) as llama.cpp's converter would describe it.
std::string write_default_model_gguf() {
  const std::string p =
      (fs::path(::testing::TempDir()) / ("vireo_e2e_" + std::to_string(::getpid()) + ".gguf")).string();
  testing::GgufWriter w;
  w.add_string("general.architecture", "qwen3");
  w.add_u32("qwen3.context_length", 4096);
  w.add_u32("qwen3.embedding_length", 256);
  w.add_u32("qwen3.block_count", 4);
  w.add_u32("qwen3.feed_forward_length", 768);
  w.add_u32("qwen3.attention.head_count", 4);
  w.add_u32("qwen3.attention.head_count_kv", 2);
  w.add_u32("qwen3.attention.key_length", 64);
  w.add_u32("qwen3.vocab_size", 151936);
  w.add_f32("qwen3.rope.freq_base", 1000000.0f);
  w.add_f32("qwen3.attention.layer_norm_rms_epsilon", 1e-6f);
  testing::add_tokenizer_metadata(w, default_tokenizer_dir(), "qwen2");
  w.write(p);
  return p;
}

TEST(EndToEndGguf, DummyGgufMatchesBuiltinModel) {
  if (!fs::exists(fs::path(default_tokenizer_dir()) / "tokenizer.json")) GTEST_SKIP() << "models/qwen3 missing";
  const std::string path = write_default_model_gguf();
  LLM gguf(config(path));
  LLM builtin(config("default"));
  const Tokenizer& tok = gguf.engine().tokenizer();
  ASSERT_NE(gguf.engine().chat_template(), nullptr);
  EXPECT_EQ(tok.chat_template(), builtin.engine().tokenizer().chat_template());
  std::vector<std::vector<int32_t>> prompts;
  for (const char* text : {"The capital of France is", "<|im_start|>user\nHello<|im_end|>\n", "数字 12345"}) {
    prompts.push_back(tok.encode(text, true));
    EXPECT_EQ(prompts.back(), builtin.engine().tokenizer().encode(text, true)) << text;
  }
  SamplingParams sp;
  sp.temperature = 0.0f;
  sp.max_tokens = 8;
  sp.ignore_eos = true;
  auto got = gguf.generate(prompts, sp), want = builtin.generate(prompts, sp);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(got[i].output.token_ids, want[i].output.token_ids) << i;
    EXPECT_EQ(got[i].output.text, want[i].output.text) << i;
  }
  fs::remove(path);
}

}  // namespace
}  // namespace vireo
