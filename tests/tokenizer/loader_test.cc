// Tokenizer::from_dir errors and basic facts (ids known from the published tokenizers).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "test_util.h"
#include "tokenizer/default_dir.h"
#include "tokenizer/regex.h"

namespace vireo {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("vireo_tok_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void write(const fs::path& p, const std::string& s) { std::ofstream(p) << s; }

std::string error_of(const std::string& dir) {
  try {
    Tokenizer::from_dir(dir);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TokenizerLoader, MissingFileNamesIt) {
  auto d = temp_dir("missing");
  std::string msg = error_of(d.string());
  EXPECT_NE(msg.find("tokenizer.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find(d.string()), std::string::npos) << msg;
}

TEST(TokenizerLoader, MalformedJsonNamesTheFile) {
  auto d = temp_dir("malformed");
  write(d / "tokenizer.json", "{\"model\": {\"type\": \"BPE\", ");
  std::string msg = error_of(d.string());
  EXPECT_NE(msg.find((d / "tokenizer.json").string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("malformed JSON"), std::string::npos) << msg;
}

TEST(TokenizerLoader, MalformedConfigNamesTheFile) {
  auto d = temp_dir("badconfig");
  fs::copy_file(test::source_path("models/llama2/tokenizer.json"), d / "tokenizer.json");
  write(d / "tokenizer_config.json", "{not json");
  std::string msg = error_of(d.string());
  EXPECT_NE(msg.find("tokenizer_config.json"), std::string::npos) << msg;
}

TEST(TokenizerLoader, BadMergeNamesTheFile) {
  auto d = temp_dir("badmerge");
  write(d / "tokenizer.json",
        R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a b"]}, "added_tokens": []})");
  std::string msg = error_of(d.string());
  EXPECT_NE(msg.find("tokenizer.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("merge"), std::string::npos) << msg;
}

TEST(TokenizerLoader, UnsupportedComponentNamesIt) {
  auto d = temp_dir("unsupported");
  write(d / "tokenizer.json",
        R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "normalizer": {"type": "Bogus"}})");
  std::string msg = error_of(d.string());
  EXPECT_NE(msg.find("Bogus"), std::string::npos) << msg;
}

TEST(TokenizerLoader, TinyTokenizerWithoutConfig) {
  auto d = temp_dir("tiny");
  write(d / "tokenizer.json", R"({
    "added_tokens": [{"id": 5, "content": "<s>", "single_word": false, "lstrip": false, "rstrip": false,
                      "normalized": false, "special": true}],
    "normalizer": null, "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "Removed",
                                           "invert": false},
    "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}}], "pair": [],
                       "special_tokens": {"<s>": {"id": "<s>", "ids": [5], "tokens": ["<s>"]}}},
    "decoder": null,
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "c": 3, "abc": 4}, "merges": [["a", "b"], "ab c"]}})");
  auto tok = Tokenizer::from_dir(d.string());
  EXPECT_EQ(tok->encode("abc ab<s>c", false), (std::vector<int32_t>{4, 2, 5, 3}));
  EXPECT_EQ(tok->encode("abc", true), (std::vector<int32_t>{5, 4}));
  EXPECT_EQ(tok->vocab_size(), 6);
  EXPECT_TRUE(tok->is_special(5));
  EXPECT_FALSE(tok->is_special(4));
  EXPECT_EQ(tok->decode(std::vector<int32_t>{4, 2, 99}, false), "abc ab");  // unknown ids skipped
  EXPECT_FALSE(tok->bos_token().has_value());
  EXPECT_EQ(tok->chat_template(), "");
  // A processor's chat_template.json (Gemma 3, Qwen2-VL) serves when nothing else has a template;
  // chat_template.jinja wins over it.
  std::ofstream(d / "chat_template.json") << R"({"chat_template": "{{ messages[0]['content'] }}"})";
  EXPECT_EQ(Tokenizer::from_dir(d.string())->chat_template(), "{{ messages[0]['content'] }}");
  std::ofstream(d / "chat_template.jinja") << "jinja";
  EXPECT_EQ(Tokenizer::from_dir(d.string())->chat_template(), "jinja");
}

TEST(Tokenizer, KnownIds) {
  const Tokenizer& qwen = test::cached_tokenizer("qwen3");
  EXPECT_EQ(qwen.encode("Hello world", false), (std::vector<int32_t>{9707, 1879}));
  EXPECT_EQ(qwen.eos_token(), "<|im_end|>");
  EXPECT_EQ(qwen.eos_token_id(), 151645);
  EXPECT_FALSE(qwen.bos_token().has_value());
  EXPECT_NE(qwen.chat_template().find("im_start"), std::string::npos);
  EXPECT_EQ(qwen.vocab_size(), 151669);
  EXPECT_EQ(qwen.token_to_id("<|im_start|>"), 151644);
  EXPECT_EQ(qwen.id_to_token(151644), "<|im_start|>");
  EXPECT_EQ(qwen.id_to_token(-3), "");

  const Tokenizer& llama3 = test::cached_tokenizer("llama3");
  EXPECT_EQ(llama3.bos_token_id(), 128000);
  const Tokenizer& gemma = test::cached_tokenizer("gemma3");
  EXPECT_EQ(gemma.bos_token_id(), 2);
  EXPECT_EQ(gemma.encode("Hello", true).front(), 2);
  const Tokenizer& ds = test::cached_tokenizer("deepseek_v3");  // bos given as an AddedToken dict
  EXPECT_EQ(ds.bos_token_id(), 0);
  EXPECT_EQ(ds.decode(ds.encode("hello world", false), false), "hello world");
}

TEST(Tokenizer, InvalidUtf8InputIsRepaired) {
  const Tokenizer& qwen = test::cached_tokenizer("qwen3");
  EXPECT_EQ(qwen.encode("a\xFF" "b", false), qwen.encode("a\xEF\xBF\xBD" "b", false));
}

TEST(Tokenizer, RegexWhitespaceIncludesNel) {
  EXPECT_EQ(Regex::translate("a\\sb"), "a[\\x{9}-\\x{D}\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}"
                                       "\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}]b");
  Regex re("\\s+", "test");
  auto m = re.find_all("x\xC2\x85y");  // U+0085
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0], (std::pair<size_t, size_t>{1, 3}));
}

TEST(Tokenizer, DefaultDirHoldsQwen3) {
  auto dir = default_tokenizer_dir();
  EXPECT_TRUE(fs::exists(fs::path(dir) / "tokenizer.json")) << dir;
  EXPECT_EQ(fs::path(dir).filename(), "qwen3");
}

}  // namespace
}  // namespace vireo
