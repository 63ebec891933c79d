// GGUF pre "deepseek-coder" (DeepSeek-Coder 1.3B / 6.7B / 33B): the pipeline against the tokenizer.json form of
// it, spelled here with literal characters as the models' tokenizer.json has it (Vireo's own copy shares the
// \u-escaped CJK class with "deepseek-llm"), and the pieces it makes against ones derived by hand from the
// regexes as tokenizers runs them.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gguf_test_util.h"
#include "tokenizer/deepseek_coder_pre.h"
#include "tokenizer/pre_tokenizer.h"

namespace vireo {
namespace {

// The models' tokenizer.json "pre_tokenizer" (deepseek-ai/deepseek-coder-*; the regexes as llama.cpp's
// src/llama-vocab.cpp also lists them for LLAMA_VOCAB_PRE_TYPE_DEEPSEEK_CODER). The CJK class is
// U+4E00-U+9FA5, U+0800-U+4E00, U+AC00-U+D7FF.
const char* const kTokenizerJsonPre =
    R"({"type": "Sequence", "pretokenizers": [)"
    R"(      {"type": "Split", "pattern": {"Regex": "[\r\n]"}, "behavior": "Isolated", "invert": false},)"
    R"(      {"type": "Split", "pattern": {"Regex": "\\s?\\p{L}+"}, "behavior": "Isolated", "invert": false},)"
    R"(      {"type": "Split", "pattern": {"Regex": "\\s?\\p{P}+"}, "behavior": "Isolated", "invert": false},)"
    R"(      {"type": "Split", "pattern": {"Regex": "[一-龥ࠀ-一가-퟿]+"}, "behavior": "Isolated", "invert": false},)"
    R"(      {"type": "Digits", "individual_digits": true},)"
    R"(      {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]})";

std::vector<std::string> pieces(const std::string& text) {
  return test::pieces_before_byte_level(deepseek_coder_pre_tokenizer(), "deepseek-coder", text);
}

struct Case {
  std::string text;
  std::vector<std::string> want;
};

// Each worked through the four Splits and Digits in order (each Split keeps its matches and the text between
// them as pieces). What decides them: \s? takes one whitespace character only when letters or punctuation
// follow; symbols (\p{S}: + = < > $ ^ | ~ ` and emoji) are neither, so they stay in the text between matches
// with the whitespace around them; the CJK class (U+0800-U+4E00 takes in kana, Devanagari, U+2014, U+2026,
// U+3000-U+303F, Roman numerals...) cuts any piece again, a space before it included; digits go one by one.
const std::vector<Case> kCases = {
    // Code.
    {"def add(a, b):\n    return a + b\n",
     {"def", " add", "(", "a", ",", " b", "):", "\n", "   ", " return", " a", " +", " b", "\n"}},
    {"x = arr[i] * 2;", {"x", " =", " arr", "[", "i", "]", " *", " ", "2", ";"}},  // '*' is Po, '=' Sm
    {"my_var_2 -> self.__init__()", {"my", "_", "var", "_", "2", " -", ">", " self", ".__", "init", "__()"}},
    {"if (n >= 10) { return -1; }",
     {"if", " (", "n", " >= ", "1", "0", ")", " {", " return", " -", "1", ";", " }"}},
    {"price: $3.50 (50% off)", {"price", ":", " $", "3", ".", "5", "0", " (", "5", "0", "%", " off", ")"}},
    {"<div class=\"x\">", {"<", "div", " class", "=", "\"", "x", "\"", ">"}},
    {"email@example.com", {"email", "@", "example", ".", "com"}},
    {"\"quoted\" 'single'", {"\"", "quoted", "\"", " '", "single", "'"}},
    // Whitespace: runs stay whole between matches, the last one before a word goes with it; no trailing rule.
    {"a  b\t\tc   ", {"a", " ", " b", "\t", "\tc", "   "}},
    {"   leading", {"  ", " leading"}},
    {"end.\n", {"end", ".", "\n"}},
    {"line1\r\nline2\n\n", {"line", "1", "\r", "\n", "line", "2", "\n", "\n"}},
    {"a\u00A0b", {"a", "\u00A0b"}},  // no-break space is \s
    // CJK and Hangul: letters to \p{L}, then cut from any space; full-width punctuation is P but not CJK.
    {"你好，世界！", {"你好", "，", "世界", "！"}},
    {"print(\"你好 world\")  # 注释", {"print", "(\"", "你好", " world", "\")", " ", " #", " ", "注释"}},
    {"abc漢字def", {"abc", "漢字", "def"}},
    {"안녕하세요 세계", {"안녕하세요", " ", "세계"}},
    {"ひらがなカタカナ漢字 text", {"ひらがなカタカナ漢字", " text"}},
    {"a\u3000b", {"a", "\u3000", "b"}},  // U+3000 is \s, and in the CJK class
    {"ＡＢＣ１２３", {"ＡＢＣ", "１", "２", "３"}},
    // Unicode punctuation: 「」— are P and in U+0800-U+4E00, so they join and lose their space; … too.
    {"「引用」— 完了。", {"「", "引用", "」—", " ", "完了", "。"}},
    {"a — b…", {"a", " ", "—", " b", "…"}},
    // Emoji are symbols.
    {"ok 😀👍 done", {"ok", " 😀👍", " done"}},
    {"hi😀there", {"hi", "😀", "there"}},
    // Other numbers are \p{N} (Ⅻ, Nl, also falls in the CJK class); marks are not letters.
    {"x² + ½ = ٣ Ⅻ", {"x", "²", " + ", "½", " = ", "٣", " ", "Ⅻ"}},
    {"Ελληνικά и русский Բարեւ", {"Ελληνικά", " и", " русский", " Բարեւ"}},
    {"cafe\u0301 naïve", {"cafe", "\u0301", " naïve"}},
    {"नमस्ते", {"नमस", "्", "त", "े"}},
};

TEST(GgufDeepseekCoder, PipelineIsTheTokenizerJsons) {
  EXPECT_EQ(deepseek_coder_pre_tokenizer(), nlohmann::json::parse(kTokenizerJsonPre));
}

TEST(GgufDeepseekCoder, PiecesAsDerivedByHand) {
  for (const Case& c : kCases) EXPECT_EQ(pieces(c.text), c.want) << nlohmann::json(c.text).dump();
}

// DeepSeek-V3's vocabulary (with the same empty normaliser as DeepSeek-Coder's) under "deepseek-coder" against
// its tokenizer.json with the pre_tokenizer swapped for DeepSeek-Coder's. V3's vocabulary has multi-digit
// tokens, so it also shows the digits' split. DeepSeek-Coder's GGUF files are of architecture llama.
TEST(GgufDeepseekCoder, MatchesTokenizerJson) {
  const test::EditedTokenizer ds("deepseek_v3", "deepseek_coder",
                                 [](nlohmann::json& tj) { tj["pre_tokenizer"] = nlohmann::json::parse(kTokenizerJsonPre); });
  auto gg = ds.gguf("llama", "deepseek-coder");
  auto hf = ds.hf();
  std::vector<std::string> all = test::gguf_texts();
  for (const Case& c : kCases) all.push_back(c.text);
  for (const char* t : {"#include <stdio.h>\nint main(void) {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}\n",
                        "const f = (a, b) => a ?? b; // 求和\n", "SELECT * FROM t WHERE id IN (1, 22, 333);",
                        "x |= 0xFF; y ^= ~z; s = `tmpl ${v}`", "Привет, мир! Γειά σου κόσμε.",
                        "ﾊﾝｶｸ half-width kana, ひらがな カタカナ 漢字", "𐐀𐐨 Deseret and 𞤀𞤢 Adlam", "\t\tindent\n  trailing   ",
                        "“quoted” ‘single’ — dash… done。", "한국어 텍스트와 English 혼합 123"})
    all.push_back(t);
  test::expect_same_encodings(*gg, *hf, all);
  auto id = [&](const char* t) { return *hf->token_to_id(t); };
  ASSERT_TRUE(hf->token_to_id("12"));
  EXPECT_EQ(gg->encode("2024", false), (std::vector<int32_t>{id("2"), id("0"), id("2"), id("4")}));
  EXPECT_EQ(gg->encode("12", false), (std::vector<int32_t>{id("1"), id("2")}));
}

}  // namespace
}  // namespace vireo
