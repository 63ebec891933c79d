// Dataset builders with the real Qwen3 tokenizer (models/qwen3, fetched by scripts/setup.sh).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "bench/datasets.h"
#include "bench/sharegpt_dataset.h"
#include "core/error.h"
#include "tokenizer/tokenizer.h"

using namespace vireo::bench;

namespace {

const vireo::Tokenizer& qwen3() {
  static std::unique_ptr<vireo::Tokenizer> tok = vireo::Tokenizer::from_dir(VIREO_SOURCE_DIR "/models/qwen3");
  return *tok;
}

std::vector<std::string> sonnet_lines() {
  return read_lines_keep_newline(VIREO_SOURCE_DIR "/benchmarks/data/sonnet.txt");
}

}  // namespace

TEST(BenchDatasets, RandomPromptsHaveExactTokenLengths) {
  RandomDatasetOptions o;
  o.num_requests = 40;
  o.input_len = 64;
  o.output_len = 16;
  o.range_ratio = 0.5;
  o.seed = 5;
  auto reqs = build_random_dataset(qwen3(), o);
  ASSERT_EQ(reqs.size(), 40u);
  bool lens_vary = false;
  for (const auto& r : reqs) {
    // Re-encoding the prompt gives exactly the recorded length.
    EXPECT_EQ(static_cast<int>(qwen3().encode(r.prompt, false).size()), r.prompt_len) << r.prompt;
    EXPECT_GE(r.prompt_len, 32);
    EXPECT_LE(r.prompt_len, 96);
    EXPECT_GE(r.expected_output_len, 8);
    EXPECT_LE(r.expected_output_len, 24);
    lens_vary |= r.prompt_len != reqs[0].prompt_len;
  }
  EXPECT_TRUE(lens_vary);
  // Seeded: the same options give the same prompts.
  auto again = build_random_dataset(qwen3(), o);
  EXPECT_EQ(again[7].prompt, reqs[7].prompt);
}

TEST(BenchDatasets, RandomPrefixIsShared) {
  RandomDatasetOptions o;
  o.num_requests = 5;
  o.input_len = 32;
  o.prefix_len = 16;
  o.seed = 1;
  auto reqs = build_random_dataset(qwen3(), o);
  for (const auto& r : reqs) {
    EXPECT_EQ(r.prompt_len, 48);
    EXPECT_EQ(static_cast<int>(qwen3().encode(r.prompt, false).size()), 48);
  }
  // The first 16 ids (the shared prefix) agree across prompts, up to a token merged at the seam.
  auto a = qwen3().encode(reqs[0].prompt, false), b = qwen3().encode(reqs[1].prompt, false);
  int same = 0;
  while (same < 48 && a[same] == b[same]) ++same;
  EXPECT_GE(same, 14);
}

// vLLM's prefix_repetition: num_prefixes shared prefixes, each prompt its own suffix, the count asked for
// (the remainder of num_requests / num_prefixes on the first prefixes), seeded.
TEST(BenchDatasets, PrefixRepetitionSharesFewPrefixes) {
  PrefixRepetitionOptions o;
  o.num_requests = 11;
  o.prefix_len = 32;
  o.suffix_len = 8;
  o.num_prefixes = 3;
  o.output_len = 5;
  o.seed = 2;
  auto reqs = build_prefix_repetition_dataset(qwen3(), o);
  ASSERT_EQ(reqs.size(), 11u);
  std::vector<std::vector<int32_t>> heads;
  for (const auto& r : reqs) {
    EXPECT_NEAR(r.prompt_len, 40, 2);
    EXPECT_EQ(r.expected_output_len, 5);
    auto ids = qwen3().encode(r.prompt, false);
    ASSERT_GE(ids.size(), 24u);
    std::vector<int32_t> head(ids.begin(), ids.begin() + 24);  // well inside the 32-token prefix
    if (std::find(heads.begin(), heads.end(), head) == heads.end()) heads.push_back(head);
  }
  EXPECT_EQ(heads.size(), 3u);  // three distinct prefixes, each shared
  EXPECT_NE(reqs[0].prompt, reqs[1].prompt);
  EXPECT_EQ(build_prefix_repetition_dataset(qwen3(), o)[4].prompt, reqs[4].prompt);
  o.num_prefixes = 0;
  EXPECT_THROW(build_prefix_repetition_dataset(qwen3(), o), vireo::Error);
}

TEST(BenchDatasets, SonnetSharesPrefixAndRespectsInputLen) {
  SonnetDatasetOptions o;
  o.num_requests = 20;
  o.input_len = 300;
  o.prefix_len = 150;
  o.output_len = 50;
  o.seed = 0;
  auto lines = sonnet_lines();
  ASSERT_GT(lines.size(), 100u);
  auto reqs = build_sonnet_dataset(qwen3(), lines, o);
  ASSERT_EQ(reqs.size(), 20u);
  std::string fixed = "Pick as many lines as you can from these poem lines:\n" + lines[0] + lines[1];
  for (const auto& r : reqs) {
    EXPECT_LE(r.prompt_len, 300);
    EXPECT_GT(r.prompt_len, 150);
    EXPECT_EQ(r.expected_output_len, 50);
    EXPECT_EQ(static_cast<int>(qwen3().encode(r.prompt, true).size()), r.prompt_len);
    // Completions get the chat-formatted text, which contains the shared prefix lines.
    EXPECT_NE(r.prompt.find(fixed), std::string::npos);
    EXPECT_NE(r.prompt.find("<|im_start|>user\n"), std::string::npos);
  }
  EXPECT_NE(reqs[0].prompt, reqs[1].prompt);  // the random lines differ

  o.return_prompt_formatted = false;  // openai-chat: the server applies the template
  auto raw = build_sonnet_dataset(qwen3(), lines, o);
  EXPECT_EQ(raw[0].prompt.rfind("Pick as many lines", 0), 0u);
  EXPECT_EQ(raw[0].prompt_len, reqs[0].prompt_len);
}

TEST(BenchDatasets, SonnetInputTooShortThrows) {
  SonnetDatasetOptions o;
  o.input_len = 5;
  EXPECT_THROW(build_sonnet_dataset(qwen3(), sonnet_lines(), o), vireo::Error);
}

TEST(BenchDatasets, CustomJsonl) {
  auto path = std::filesystem::temp_directory_path() / "vireo_bench_custom.jsonl";
  {
    std::ofstream f(path);
    f << "{\"prompt\": \"Hello world\", \"output_tokens\": 7}\n\n{\"prompt\": \"Second prompt here\"}\n";
  }
  CustomDatasetOptions o;
  o.num_requests = 3;
  o.output_len = 11;
  o.shuffle = false;  // --disable-shuffle: the file's order
  auto reqs = load_custom_dataset(qwen3(), path.string(), o);
  ASSERT_EQ(reqs.size(), 3u);  // oversampled to --num-prompts
  EXPECT_EQ(reqs[0].prompt, "Hello world");
  EXPECT_EQ(reqs[0].prompt_len, static_cast<int>(qwen3().encode("Hello world", true).size()));
  EXPECT_EQ(reqs[0].expected_output_len, 7);
  EXPECT_EQ(reqs[1].expected_output_len, 11);
  EXPECT_EQ(reqs[2].prompt, "Hello world");
  {  // shuffled (vLLM's default), seeded: a permutation of the lines, the same for the same seed
    std::ofstream f(path);
    for (int i = 0; i < 20; ++i) f << "{\"prompt\": \"line " << i << "\"}\n";
  }
  o.num_requests = 20;
  o.shuffle = true;
  o.seed = 3;
  auto shuffled = load_custom_dataset(qwen3(), path.string(), o);
  ASSERT_EQ(shuffled.size(), 20u);
  std::vector<std::string> got, want;
  for (int i = 0; i < 20; ++i) got.push_back(shuffled[i].prompt), want.push_back("line " + std::to_string(i));
  EXPECT_NE(got, want);
  std::sort(got.begin(), got.end());
  std::sort(want.begin(), want.end());
  EXPECT_EQ(got, want);
  EXPECT_EQ(load_custom_dataset(qwen3(), path.string(), o)[5].prompt, shuffled[5].prompt);
  {
    std::ofstream f(path);
    f << "{\"text\": \"no prompt field\"}\n";
  }
  EXPECT_THROW(load_custom_dataset(qwen3(), path.string(), o), vireo::Error);
  std::filesystem::remove(path);
}

// vLLM's ShareGPT format: the first two turns give the prompt and the output length; one-turn entries,
// prompts under 4 tokens and outputs under 4 (unless forced) are skipped; fewer than asked repeat.
TEST(BenchDatasets, ShareGptJson) {
  auto path = std::filesystem::temp_directory_path() / "vireo_bench_sharegpt.json";
  const std::string answer = "Paris is the capital and largest city of France, on the Seine.";
  {
    std::ofstream f(path);
    f << R"([{"id": "a", "conversations": [{"from": "human", "value": "What is the capital of France, please?"},
                                           {"from": "gpt", "value": ")"
      << answer << R"("}]},
             {"id": "b", "conversations": [{"from": "human", "value": "One turn only, no answer here."}]},
             {"id": "c", "conversations": [{"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Hello there, friend."}]},
             {"id": "d", "conversations": [{"from": "human", "value": "Tell me a very short story now."},
                                           {"from": "gpt", "value": "No."}]},
             {"id": "e"}])";
  }
  ShareGptDatasetOptions o;
  o.num_requests = 3;
  auto reqs = load_sharegpt_dataset(qwen3(), path.string(), o);
  ASSERT_EQ(reqs.size(), 3u);  // one usable conversation, oversampled
  EXPECT_EQ(reqs[0].prompt, "What is the capital of France, please?");
  EXPECT_EQ(reqs[0].prompt_len, static_cast<int>(qwen3().encode(reqs[0].prompt, true).size()));
  EXPECT_EQ(reqs[0].expected_output_len, static_cast<int>(qwen3().encode(answer, true).size()));
  EXPECT_EQ(reqs[2].prompt, reqs[0].prompt);
  o.output_len = 2;  // forced: the short answer of "d" no longer disqualifies it
  reqs = load_sharegpt_dataset(qwen3(), path.string(), o);
  int story = 0;
  for (const auto& r : reqs) {
    EXPECT_EQ(r.expected_output_len, 2);
    story += r.prompt == "Tell me a very short story now.";
  }
  EXPECT_GE(story, 1);
  {
    std::ofstream f(path);
    f << R"({"conversations": []})";
  }
  EXPECT_THROW(load_sharegpt_dataset(qwen3(), path.string(), o), vireo::Error);
  std::filesystem::remove(path);
}
