// The tokenizer rebuilt from GGUF metadata against the tokenizer.json it was converted from
// (tests/gguf_util/hf_to_gguf.h writes tokenizer.ggml.* as convert_hf_to_gguf.py does), for
// Qwen3 (pre "qwen2"), Llama-3 (pre "llama-bpe"), Llama-2 (SentencePiece, merges rebuilt from
// scores), gpt-oss (pre "gpt-4o") and DeepSeek-V3 (pre "deepseek-v3": three Splits): same ids and text on the shared corpus
// plus unicode, digits, whitespace runs and special tokens.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../gguf_util/hf_to_gguf.h"
#include "core/error.h"
#include "gguf_test_util.h"
#include "test_util.h"

namespace vireo {
namespace {

namespace fs = std::filesystem;
using test::EditedQwen3;
using test::expect_same_encodings;

std::string gguf_path(const std::string& name) {
  return (fs::path(::testing::TempDir()) / ("vireo_gguf_tok_" + std::to_string(::getpid()) + "_" + name + ".gguf")).string();
}

// Writes a tokenizer-only GGUF for models/<name> once per test run.
const std::string& converted(const std::string& name, const std::string& pre) {
  static std::map<std::string, std::string> done;  // test-only memo
  auto& p = done[name];
  if (p.empty()) {
    testing::GgufWriter w;
    w.add_string("general.architecture", "llama");
    if (pre == "sentencepiece") {
      testing::add_spm_tokenizer_metadata(w, test::source_path("models/" + name));
    } else {
      testing::add_tokenizer_metadata(w, test::source_path("models/" + name), pre);
    }
    p = gguf_path(name);
    w.write(p);
  }
  return p;
}

struct Case {
  std::string name, pre;
  // The file says tokenizer.ggml.add_bos_token (the converter copies tokenizer_config.json's add_bos_token),
  // which llama.cpp honours, while tokenizer.json adds nothing (DeepSeek-V3: a ByteLevel post-processor,
  // read as PreTrainedTokenizerFast reads it): with special tokens the GGUF encoding is BOS + the same ids.
  bool gguf_adds_bos = false;
};

class GgufTokenizer : public ::testing::TestWithParam<Case> {};

TEST_P(GgufTokenizer, MatchesTokenizerJson) {
  const Case& c = GetParam();
  const Tokenizer& hf = test::cached_tokenizer(c.name);
  auto gg = Tokenizer::from_dir(converted(c.name, c.pre));
  EXPECT_EQ(gg->vocab_size(), hf.vocab_size());
  EXPECT_EQ(gg->eos_token_id(), hf.eos_token_id());
  EXPECT_EQ(gg->chat_template(), hf.chat_template());
  auto expected = [&](const std::string& t, bool add_special) {
    std::vector<int32_t> ids = hf.encode(t, add_special);
    if (add_special && c.gguf_adds_bos) ids.insert(ids.begin(), *hf.bos_token_id());
    return ids;
  };
  int bad = 0;
  for (const std::string& t : test::gguf_texts()) {
    for (bool add_special : {false, true}) {
      const auto want = expected(t, add_special), got = gg->encode(t, add_special);
      if (got != want && bad++ < 10) ADD_FAILURE() << "encode differs for " << nlohmann::json(t).dump();
    }
    const auto ids = hf.encode(t, false);
    if (gg->decode(ids, false) != hf.decode(ids, false) && bad++ < 10)
      ADD_FAILURE() << "decode differs for " << nlohmann::json(t).dump();
    // The converter marks <|...|> tokens as control even where tokenizer.json does not call them
    // special (Qwen3's <|fim_prefix|>...), so skip_special_tokens is compared where both agree.
    bool same_specials = true;
    for (int32_t id : ids) same_specials &= gg->is_special(id) == hf.is_special(id);
    if (same_specials && gg->decode(ids, true) != hf.decode(ids, true) && bad++ < 10)
      ADD_FAILURE() << "decode(skip_special_tokens) differs for " << nlohmann::json(t).dump();
  }
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(gg->encode(" Hello  world\n", true), expected(" Hello  world\n", true));
  std::printf("%s: ' Hello  world\\n' -> %s\n", c.name.c_str(), nlohmann::json(gg->encode(" Hello  world\n", true)).dump().c_str());
  // Special and user-defined tokens: control (3) ones special, user-defined (4) ones not.
  for (const char* tok : {"<|im_end|>", "<|endoftext|>", "<think>", "<|eot_id|>", "<|begin_of_text|>", "<s>", "<unk>"}) {
    auto id = hf.token_to_id(tok);
    if (!id) continue;
    EXPECT_EQ(gg->token_to_id(tok), id) << tok;
    EXPECT_EQ(gg->is_special(*id), hf.is_special(*id)) << tok;
  }
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, GgufTokenizer,
                         ::testing::Values(Case{"qwen3", "qwen2"}, Case{"llama3", "llama-bpe"},
                                           Case{"llama2", "sentencepiece"}, Case{"gptoss", "gpt-4o"},
                                           Case{"deepseek_v3", "deepseek-v3", true}),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

// Qwen3.5's pre "qwen35" (Qwen2's split with combining marks kept in words): the Qwen3 vocabulary under
// that pre against the Qwen3 tokenizer.json with its Split regex swapped for Qwen3.5's (the one difference
// between the two pipelines), on the corpus plus scripts whose vowel signs are marks (Devanagari, Thai,
// Tamil). The marks change the split: those texts encode differently under "qwen2".
TEST(GgufTokenizerPre, Qwen35KeepsMarksInWords) {
  bool swapped = false;
  const EditedQwen3 q("qwen35", [&](nlohmann::json& tj) {
    const std::string qwen35 =
        "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|"
        "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
    for (auto& p : tj["pre_tokenizer"]["pretokenizers"])
      if (p["type"] == "Split") p["pattern"]["Regex"] = qwen35, swapped = true;
  });
  ASSERT_TRUE(swapped);
  auto gg = q.gguf("qwen35", "qwen35"), q2 = q.gguf("qwen35", "qwen2");
  std::vector<std::string> all = test::gguf_texts();
  const std::vector<std::string> marked = {"नमस्ते दुनिया", "สวัสดีครับ ผมชื่อ", "வணக்கம் உலகம்", "a\u0301b\u0327 x\u20dd!"};
  all.insert(all.end(), marked.begin(), marked.end());
  expect_same_encodings(*gg, *q.hf(), all);
  int differ = 0;
  for (const std::string& t : marked) differ += q2->encode(t, false) != gg->encode(t, false);
  EXPECT_GT(differ, 0) << "the marks should change the split";
}

// Hunyuan-A13B's pre "hunyuan": llama.cpp splits it with Qwen2's regex, and its tiktoken ranks have no
// normaliser. The Qwen3 vocabulary under that pre against the Qwen3 tokenizer.json without its NFC step;
// a decomposed accent is where the two pres differ.
TEST(GgufTokenizerPre, HunyuanIsQwen2WithoutNfc) {
  bool had_nfc = false;
  const EditedQwen3 q("hunyuan", [&](nlohmann::json& tj) {
    had_nfc = !tj["normalizer"].is_null();
    tj["normalizer"] = nullptr;
  });
  ASSERT_TRUE(had_nfc);
  auto gg = q.gguf("hunyuan-moe", "hunyuan"), q2 = q.gguf("hunyuan-moe", "qwen2");
  std::vector<std::string> all = test::gguf_texts();
  all.push_back("cafe\u0301 re\u0301sume\u0301");  // decomposed accents
  expect_same_encodings(*gg, *q.hf(), all);
  EXPECT_NE(q2->encode(all.back(), false), gg->encode(all.back(), false)) << "qwen2's NFC should compose the accents";
}

// GLM-4's pre "glm4" (llama.cpp's CHATGLM4: Llama-3's split, no normaliser), OLMo's "olmo" and EXAONE 4's
// "exaone4" (GPT-2's byte-level split): the Qwen3 vocabulary under each pre against the Qwen3 tokenizer.json with that
// pipeline spelled out.
TEST(GgufTokenizerPre, Glm4IsLlama3SplitAndOlmoIsGpt2) {
  const std::string llama3 =
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
      "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  bool swapped = false;
  const EditedQwen3 glm("glm4", [&](nlohmann::json& tj) {
    tj["normalizer"] = nullptr;
    for (auto& p : tj["pre_tokenizer"]["pretokenizers"])
      if (p["type"] == "Split") p["pattern"]["Regex"] = llama3, swapped = true;
  });
  ASSERT_TRUE(swapped);
  std::vector<std::string> all = test::gguf_texts();
  all.push_back("12345678 digits, cafe\u0301");
  for (const char* pre : {"glm4", "chatglm-bpe"}) expect_same_encodings(*glm.gguf("glm4", pre), *glm.hf(), all);
  const EditedQwen3 olmo("olmo", [&](nlohmann::json& tj) {
    tj["normalizer"] = nullptr;
    tj["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", true}};
  });
  expect_same_encodings(*olmo.gguf("olmoe", "olmo"), *olmo.hf(), all);
  expect_same_encodings(*olmo.gguf("exaone4", "exaone4"), *olmo.hf(), all);  // llama.cpp: EXAONE 4 -> GPT2
  // Where the two splits part: Llama-3's takes one non-letter before a word and upper-case contractions.
  auto g2 = olmo.gguf("olmoe", "olmo"), l3 = glm.gguf("glm4", "glm4");
  int differ = 0;
  for (const char* t : {"x!hello", "IT'S", "(hello)", ".Hello", "\"Hello\"", "#include"})
    differ += g2->encode(t, false) != l3->encode(t, false);
  EXPECT_GT(differ, 0) << "the GPT-2 and Llama-3 splits should differ somewhere";
}

// Mistral's pre "tekken" (o200k-style cased words without contractions, single digits, whole words before
// merges), Seed-Coder's "seed-coder" and the digit-split family llama.cpp runs for "starcoder", "refact" (Granite), "command-r", "smollm",
// "codeshell", "exaone" (EXAONE 3) and "minerva-7b": the Qwen3 vocabulary under each against a Qwen3
// tokenizer.json spelling that pipeline (HF's Digits pre-tokenizer for the second; Qwen3's vocabulary has only
// single-digit tokens, so PreTokenizer.Digits is what shows the digits' split).
TEST(GgufTokenizerPre, TekkenSeedCoderAndDigitSplits) {
  const std::string tekken =
      "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|"
      "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|"
      "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  bool swapped = false;
  const EditedQwen3 tk("tekken", [&](nlohmann::json& tj) {
    tj["normalizer"] = nullptr;
    tj["model"]["ignore_merges"] = true;
    for (auto& p : tj["pre_tokenizer"]["pretokenizers"])
      if (p["type"] == "Split") p["pattern"]["Regex"] = tekken, swapped = true;
  });
  ASSERT_TRUE(swapped);
  std::vector<std::string> all = test::gguf_texts();
  all.push_back("HelloWorld camelCaseName IT'S 2024/12/07 a/b\n");
  auto gg = tk.gguf("llama", "tekken");
  expect_same_encodings(*gg, *tk.hf(), all);
  // Tekken parts words at case changes ("i" "Phone") where Qwen2's split keeps one word for the vocabulary's
  // whole-word tokens.
  const EditedQwen3 plain("tekken_q2", [](nlohmann::json& tj) { tj["normalizer"] = nullptr; });
  auto q2 = plain.gguf("qwen2", "hunyuan");
  int differ = 0;
  for (const char* t : {"iPhone", "macOS", "McDonald", "JavaScript", "YouTube"})
    differ += gg->encode(t, false) != q2->encode(t, false);
  EXPECT_GT(differ, 0) << "tekken's case boundaries should change some encodings";

  // Seed-Coder / Seed-OSS: Llama-3's split with single digits and punctuation runs that stop at line breaks.
  const std::string seed =
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|"
      "\\s+(?!\\S)|\\s+";
  const EditedQwen3 sc("seed_coder", [&](nlohmann::json& tj) {
    tj["normalizer"] = nullptr;
    for (auto& p : tj["pre_tokenizer"]["pretokenizers"])
      if (p["type"] == "Split") p["pattern"]["Regex"] = seed;
  });
  expect_same_encodings(*sc.gguf("seed_oss", "seed-coder"), *sc.hf(), all);

  const EditedQwen3 dg("digits", [](nlohmann::json& tj) {
    tj["normalizer"] = nullptr;
    tj["pre_tokenizer"] = {{"type", "Sequence"},
                           {"pretokenizers",
                            {{{"type", "Digits"}, {"individual_digits", true}},
                             {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}}}};
  });
  all.push_back("x = 12345; y=6.78e9 \u0661\u0662");
  for (const char* pre : {"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"})
    expect_same_encodings(*dg.gguf("llama", pre), *dg.hf(), all);
}

TEST(GgufTokenizerErrors, ClearMessages) {
  const std::string p = gguf_path("bad");
  auto expect = [&](const std::function<void(testing::GgufWriter&)>& fill, const std::string& what) {
    testing::GgufWriter w;
    fill(w);
    w.write(p);
    try {
      Tokenizer::from_dir(p);
      ADD_FAILURE() << "loaded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  expect([](auto&) {}, "metadata 'tokenizer.ggml.model' is missing");
  expect([](auto& w) { w.add_string("tokenizer.ggml.model", "t5"); }, "tokenizer.ggml.model 't5' is not supported");
  expect([](auto& w) {
    w.add_string("tokenizer.ggml.model", "llama");
    w.add_string_array("tokenizer.ggml.tokens", {"a", "b"});
  }, "metadata 'tokenizer.ggml.scores' is missing");
  expect([](auto& w) {
    w.add_string("tokenizer.ggml.model", "gpt2");
    w.add_string_array("tokenizer.ggml.tokens", {"a", "b"});
    w.add_string_array("tokenizer.ggml.merges", {"a b"});
    w.add_string("tokenizer.ggml.pre", "falcon");
  }, "tokenizer.ggml.pre 'falcon' is not supported");
  expect([](auto& w) {
    w.add_string("tokenizer.ggml.model", "gpt2");
    w.add_string_array("tokenizer.ggml.tokens", {"a", "b"});
    w.add_string_array("tokenizer.ggml.merges", {"a b"});
    w.add_u32("tokenizer.ggml.bos_token_id", 7);
  }, "'tokenizer.ggml.bos_token_id' = 7 is not a token id");
  fs::remove(p);
  try {  // a .gguf name that does not exist: the file is named, not "<file>/tokenizer.json"
    Tokenizer::from_dir(p);
    ADD_FAILURE() << "loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(p + ": cannot open"), std::string::npos) << e.what();
  }
}

// llama.cpp adds BOS for llama-bpe vocabularies unless add_bos_token says otherwise.
TEST(GgufTokenizerErrors, LlamaBpeAddsBosByDefault) {
  testing::GgufWriter w;
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", "llama-bpe");
  w.add_string_array("tokenizer.ggml.tokens", {"a", "b", "ab", "<s>"});
  w.add_i32_array("tokenizer.ggml.token_type", {1, 1, 1, 3});
  w.add_string_array("tokenizer.ggml.merges", {"a b"});
  w.add_u32("tokenizer.ggml.bos_token_id", 3);
  const std::string p = gguf_path("bos");
  w.write(p);
  auto tok = Tokenizer::from_dir(p);
  EXPECT_EQ(tok->encode("abab", true), (std::vector<int32_t>{3, 2, 2}));
  EXPECT_EQ(tok->encode("abab", false), (std::vector<int32_t>{2, 2}));
  EXPECT_EQ(tok->bos_token(), "<s>");
  fs::remove(p);
}

}  // namespace
}  // namespace vireo
