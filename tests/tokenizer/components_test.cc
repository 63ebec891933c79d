// Pipeline pieces against the behaviors documented (and tested) by Hugging Face tokenizers.
#include <gtest/gtest.h>

#include "tokenizer/added_vocabulary.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/utf8.h"

namespace vireo {
namespace {

using json = nlohmann::json;

std::vector<std::string> pre_tokenize(const json& j, const std::string& text) {
  auto p = make_pre_tokenizer(j, "test");
  std::vector<PreToken> pieces{{text, true}};
  p->apply(pieces);
  std::vector<std::string> out;
  for (auto& x : pieces) out.push_back(x.text);
  return out;
}

json split_json(const char* behavior) {
  return {{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", behavior}, {"invert", false}};
}

using V = std::vector<std::string>;

TEST(PreTokenizer, SplitBehaviors) {
  const std::string s = "the-final--countdown";
  EXPECT_EQ(pre_tokenize(split_json("Removed"), s), (V{"the", "final", "countdown"}));
  EXPECT_EQ(pre_tokenize(split_json("Isolated"), s), (V{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(pre_tokenize(split_json("MergedWithPrevious"), s), (V{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(pre_tokenize(split_json("MergedWithNext"), s), (V{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(pre_tokenize(split_json("Contiguous"), s), (V{"the", "-", "final", "--", "countdown"}));
  json inv = split_json("Removed");
  inv["invert"] = true;
  EXPECT_EQ(pre_tokenize(inv, s), (V{"-", "-", "-"}));  // each delimiter is its own span
}

TEST(PreTokenizer, RegexSplitUnicodeClasses) {
  json j = json::parse(R"({"type": "Split", "behavior": "Isolated", "invert": false, "pattern": {"Regex":
      "(?i:'s|'t)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}|\\s+(?!\\S)|\\s+"}})");
  EXPECT_EQ(pre_tokenize(j, "IT'S 12345 héllo  wörld"),
            (V{"IT", "'S", " ", "123", "45", " héllo", " ", " wörld"}));
}

TEST(PreTokenizer, ByteLevelMapsBytes) {
  json j = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}};
  EXPECT_EQ(pre_tokenize(j, "a b\n"), (V{"a\xC4\xA0" "b\xC4\x8A"}));  // "aĠbĊ"
  json r = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}};
  EXPECT_EQ(pre_tokenize(r, "hi there"), (V{"\xC4\xA0hi", "\xC4\xA0there"}));
}

// HF's Digits (StarCoder / Granite tokenizer.json): digits isolated one by one, or in runs; Unicode digits too.
TEST(PreTokenizer, Digits) {
  json one = {{"type", "Digits"}, {"individual_digits", true}};
  EXPECT_EQ(pre_tokenize(one, "abc123 x4\u0664"), (V{"abc", "1", "2", "3", " x", "4", "\u0664"}));
  json runs = {{"type", "Digits"}, {"individual_digits", false}};
  EXPECT_EQ(pre_tokenize(runs, "abc123 x4\u0664"), (V{"abc", "123", " x", "4\u0664"}));
  // StarCoder's pipeline: the digits first, then GPT-2's byte-level split of what is left.
  json seq = {{"type", "Sequence"},
              {"pretokenizers", {one, {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}}}};
  EXPECT_EQ(pre_tokenize(seq, "x=12"), (V{"x", "=", "1", "2"}));
}

// HF's fixed splitters, on the sentence tokenizers' own tests use.
TEST(PreTokenizer, WhitespacePunctuationAndBert) {
  const std::string s = "Hey friend!     How are you?!?";
  EXPECT_EQ(pre_tokenize({{"type", "WhitespaceSplit"}}, s), (V{"Hey", "friend!", "How", "are", "you?!?"}));
  EXPECT_EQ(pre_tokenize({{"type", "Whitespace"}}, s), (V{"Hey", "friend", "!", "How", "are", "you", "?!?"}));
  EXPECT_EQ(pre_tokenize({{"type", "Punctuation"}}, s), (V{"Hey friend", "!", "     How are you", "?", "!", "?"}));
  EXPECT_EQ(pre_tokenize({{"type", "Punctuation"}, {"behavior", "Contiguous"}}, s),
            (V{"Hey friend", "!", "     How are you", "?!?"}));
  EXPECT_EQ(pre_tokenize({{"type", "BertPreTokenizer"}}, s), (V{"Hey", "friend", "!", "How", "are", "you", "?", "!", "?"}));
  // ASCII symbols count as punctuation (is_ascii_punctuation), as do Unicode P* characters.
  EXPECT_EQ(pre_tokenize({{"type", "BertPreTokenizer"}}, "a$b \u00bfc"), (V{"a", "$", "b", "\u00bf", "c"}));
  EXPECT_EQ(pre_tokenize({{"type", "CharDelimiterSplit"}, {"delimiter", "x"}}, "Helloxthere"), (V{"Hello", "there"}));
}

TEST(PreTokenizer, Metaspace) {
  json j = {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "always"}, {"split", true}};
  EXPECT_EQ(pre_tokenize(j, "Hey friend"), (V{"\xE2\x96\x81Hey", "\xE2\x96\x81" "friend"}));
}

TEST(Normalizer, NfcComposesAndPrependReplace) {
  EXPECT_EQ(unicode_normalize("e\xCC\x81", true, false), "\xC3\xA9");                            // é
  EXPECT_EQ(unicode_normalize("\xE1\x84\x80\xE1\x85\xA1", true, false), "\xEA\xB0\x80");        // 가
  EXPECT_EQ(unicode_normalize("\xE2\x84\xAB", true, false), "\xC3\x85");                        // Å sign
  auto n = make_normalizer(json::parse(R"({"type": "Sequence", "normalizers": [
      {"type": "Prepend", "prepend": "_"}, {"type": "Replace", "pattern": {"String": " "}, "content": "_"}]})"), "t");
  std::string s = "a b";
  n->normalize(s);
  EXPECT_EQ(s, "_a_b");
  std::string empty;
  n->normalize(empty);
  EXPECT_EQ(empty, "");  // Prepend leaves "" alone
}

TEST(AddedVocabulary, LeftmostLongestAndStripFlags) {
  AddedVocabulary v;
  v.add({1, "<a>", false, false, false, false, true});
  v.add({2, "<a><b>", false, false, false, false, true});
  v.add({3, "<m>", false, /*lstrip=*/true, /*rstrip=*/true, false, true});
  v.add({4, "word", /*single_word=*/true, false, false, false, false});
  v.build(nullptr);
  std::string text = "x<a><b>y<a> z  <m>  w word words";
  auto sp = v.split(text, false);
  std::vector<std::pair<std::string, int32_t>> got;
  for (auto& s : sp) got.emplace_back(text.substr(s.begin, s.end - s.begin), s.token_id);
  std::vector<std::pair<std::string, int32_t>> want = {
      {"x", -1}, {"<a><b>", 2}, {"y", -1}, {"<a>", 1}, {" z", -1}, {"  <m>  ", 3}, {"w ", -1}, {"word", 4},
      {" words", -1}};
  EXPECT_EQ(got, want);
}

TEST(Decoder, ByteFallbackAndStrip) {
  auto d = make_decoder(json::parse(R"({"type": "Sequence", "decoders": [
      {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"},
      {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]})"), "t");
  std::vector<std::string> toks = {"\xE2\x96\x81Hi", "<0xE2>", "<0x82>", "<0xAC>", "<0xFF>", "\xE2\x96\x81there"};
  d->decode_chain(toks);
  ASSERT_EQ(toks.size(), 1u);
  // E2 82 AC is valid only with FF excluded; the run E2 82 AC FF is invalid: one U+FFFD per byte.
  EXPECT_EQ(toks[0], "Hi\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD there");
}

TEST(Utf8, LossyReplacesMaximalSubparts) {
  EXPECT_EQ(utf8::lossy("a\xF0\x9F\x98"), "a\xEF\xBF\xBD");             // one truncated sequence
  EXPECT_EQ(utf8::lossy("\xC0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD");       // invalid lead bytes
  EXPECT_EQ(utf8::lossy("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_TRUE(utf8::is_valid("\xF0\x9F\x98\x80"));
}

}  // namespace
}  // namespace vireo
