// GGUF pre "deepseek-llm" (DeepSeek-LLM 7B / 67B, DeepSeek-V2 / V2-Lite): the pipeline against the tokenizer.json
// form of it, spelled here with literal characters as the models' tokenizer.json has it (Vireo's own copy uses
// \u escapes), and the pieces it makes against ones derived by hand from the regexes as tokenizers runs them.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gguf_test_util.h"
#include "tokenizer/deepseek_llm_pre.h"
#include "tokenizer/pre_tokenizer.h"

namespace vireo {
namespace {

// The models' tokenizer.json "pre_tokenizer" (the regexes as llama.cpp's src/llama-vocab.cpp also lists them).
const char* const kTokenizerJsonPre =
    R"({"type": "Sequence", "pretokenizers": [)"
    R"(      {"type": "Split", "pattern": {"Regex": "[\r\n]"}, "behavior": "Isolated", "invert": false},)"
    R"(      {"type": "Split", "pattern": {"Regex": "\\s?[)"
    R"(A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-Ֆ)"
    R"(Ⴀ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄ)"
    R"(ῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲ)"
    R"(ⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃)"
    R"(]+"}, "behavior": "Isolated", "invert": false},)"
    R"(      {"type": "Split", "pattern": {"Regex": "\\s?[!-/:-~！-／：-～‘-‟　-。]+"}, "behavior": "Isolated", "invert": false},)"
    R"(      {"type": "Split", "pattern": {"Regex": "\\s+$"}, "behavior": "Isolated", "invert": false},)"
    R"(      {"type": "Split", "pattern": {"Regex": "[一-龥ࠀ-一가-퟿]+"}, "behavior": "Isolated", "invert": false},)"
    R"(      {"type": "Digits", "individual_digits": true},)"
    R"(      {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]})";

std::vector<std::string> pieces(const std::string& text) {
  return test::pieces_before_byte_level(deepseek_llm_pre_tokenizer(), "deepseek-llm", text);
}

struct Case {
  std::string text;
  std::vector<std::string> want;
};

// Each worked through the five Splits and Digits in order; the comment says which step makes the case.
const std::vector<Case> kCases = {
    {"Hello world", {"Hello", " world"}},
    {"Hello, world!", {"Hello", ",", " world", "!"}},
    {"don't", {"don", "'", "t"}},
    // A space before a digit is not taken by \s? (only letters and punctuation take one); digits go one by one.
    {"I have 3 apples, 12 pears.", {"I", " have", " ", "3", " apples", ",", " ", "1", "2", " pears", "."}},
    {"abc123def", {"abc", "1", "2", "3", "def"}},
    {"x=1.5;", {"x", "=", "1", ".", "5", ";"}},
    // [\r\n] isolates each line break; whitespace before one is left alone, then taken whole by \s+$.
    {"a\n\nb  \n", {"a", "\n", "\n", "b", "  ", "\n"}},
    {"x \r\ny", {"x", " ", "\r", "\n", "y"}},
    {"  indented\tx", {" ", " indented", "\tx"}},
    {"a\u00A0b", {"a", "\u00A0b"}},  // no-break space is \s
    // Trailing whitespace: one piece, apart from what precedes it.
    {"end.   ", {"end", ".", "   "}},
    {"ok 😀  ", {"ok", " 😀", "  "}},
    {"hi😀there", {"hi", "😀", "there"}},
    // Full-width punctuation, curly quotes and U+3000-U+3002 are punctuation; CJK and Hangul runs never keep a
    // space; U+0800-U+4E00 covers symbols such as U+2605 too.
    {"你好，世界！", {"你好", "，", "世界", "！"}},
    {"“引号”。", {"“", "引号", "”。"}},
    {"a 你好", {"a", " ", "你好"}},
    {"안녕하세요 세계", {"안녕하세요", " ", "세계"}},
    {"a ★★ b", {"a", " ", "★★", " b"}},
    {" ＡＢＣ！", {" ＡＢＣ", "！"}},
    {"\u3000\u3000\u3002", {"\u3000\u3000\u3002"}},  // llama.cpp's std::wregex path splits this one in two
    // The letter class: Greek, Cyrillic, the canonical singletons, and its gaps (U+00D7, Armenian lower case).
    // Letters at U+0800 and up (Greek Extended, letterlike symbols) fall in the CJK Split's U+0800-U+4E00 too,
    // which parts them from their space.
    {"Ελληνικά и русский", {"Ελληνικά", " и", " русский"}},
    {"x \u1F7D\u1FBE 5\u212A", {"x", " ", "\u1F7D\u1FBE", " ", "5", "\u212A"}},
    {"a×b", {"a", "×", "b"}},
    {"Բարեւ", {"Բ", "արեւ"}},
};

TEST(GgufDeepseekLlm, PipelineIsTheTokenizerJsons) {
  EXPECT_EQ(deepseek_llm_pre_tokenizer(), nlohmann::json::parse(kTokenizerJsonPre));
}

TEST(GgufDeepseekLlm, PiecesAsDerivedByHand) {
  for (const Case& c : kCases) EXPECT_EQ(pieces(c.text), c.want) << nlohmann::json(c.text).dump();
}

// DeepSeek-V3's vocabulary (a successor of V2's, with the same empty normaliser) under "deepseek-llm" against
// its tokenizer.json with the pre_tokenizer swapped for DeepSeek-V2's. V3's vocabulary has multi-digit tokens,
// so it also shows the digits' split.
TEST(GgufDeepseekLlm, MatchesTokenizerJson) {
  const test::EditedTokenizer ds("deepseek_v3", "deepseek_llm",
                                 [](nlohmann::json& tj) { tj["pre_tokenizer"] = nlohmann::json::parse(kTokenizerJsonPre); });
  auto gg = ds.gguf("deepseek2", "deepseek-llm");
  auto hf = ds.hf();
  std::vector<std::string> all = test::gguf_texts();
  for (const Case& c : kCases) all.push_back(c.text);
  for (const char* t : {"DeepSeek-V2 costs $0.14 per 1M tokens, 便宜！\n", "Привет, мир! Γειά σου κόσμε.",
                        "ﾊﾝｶｸ half-width kana, ひらがな カタカナ 漢字", "𐐀𐐨 Deseret and 𞤀𞤢 Adlam", "\t\tindent\n  trailing   ",
                        "x² + ½ = ٣ and Ⅻ", "line1\r\nline2\rline3\n\n\n", "“quoted” ‘single’ — dash… done。"})
    all.push_back(t);
  test::expect_same_encodings(*gg, *hf, all);
  auto id = [&](const char* t) { return *hf->token_to_id(t); };
  EXPECT_EQ(gg->encode("2024", false), (std::vector<int32_t>{id("2"), id("0"), id("2"), id("4")}));
  ASSERT_TRUE(hf->token_to_id("12"));
  EXPECT_EQ(ds.gguf("deepseek2", "deepseek-v3")->encode("12", false), std::vector<int32_t>{id("12")})
      << "deepseek-v3 keeps up to 3 digits together";
  EXPECT_EQ(gg->encode("12", false), (std::vector<int32_t>{id("1"), id("2")}));
}

}  // namespace
}  // namespace vireo
