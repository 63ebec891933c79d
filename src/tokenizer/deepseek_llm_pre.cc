#include "tokenizer/deepseek_llm_pre.h"

namespace vireo {
namespace {

// The Split regexes in order, transcribed code point by code point from llama.cpp's src/llama-vocab.cpp
// (LLAMA_VOCAB_PRE_TYPE_DEEPSEEK_LLM), which copies them from the models' tokenizer.json. They are written as
// \u escapes because several are canonical singletons (U+1F7D, U+1FBE, U+1FD3, U+1FDB, U+2126, U+212A) that
// text tools silently NFC-normalise into other characters, turning e.g. U+1F5F-U+1F7D into a reversed range.
// The letter class is most of Lu/Ll/Lt but not all of it (no Armenian lower case, U+0561...): it is kept as is.
const char* const kLineBreak = "[\r\n]";
const char* const kLetters =
    "\\s?["
    "A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-\u0293\u0295-\u02AF\u0370-\u0373"
    "\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-\u038A\u038C\u038E-\u03A1\u03A3-\u03F5\u03F7-\u0481"
    "\u048A-\u052F\u0531-\u0556\u10A0-\u10C5\u13A0-\u13F5\u13F8-\u13FD\u1C90-\u1CBA\u1CBD-\u1CBF\u1D00-\u1D2B"
    "\u1D6B-\u1D77\u1D79-\u1D9A\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45\u1F48-\u1F4D\u1F50-\u1F57\u1F59\u1F5B"
    "\u1F5D\u1F5F-\u1F7D\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE\u1FC2-\u1FC4\u1FC6-\u1FCC\u1FD0-\u1FD3\u1FD6-\u1FDB"
    "\u1FE0-\u1FEC\u1FF2-\u1FF4\u1FF6-\u1FFC\u2102\u2107\u210A-\u2113\u2115\u2119-\u211D\u2124\u2126\u2128"
    "\u212A-\u212D\u212F-\u2134\u2139\u213C-\u213F\u2145-\u2149\u214E\u2183\u2184\u2C00-\u2C7B\u2C7E-\u2CE4"
    "\u2CEB-\u2CEE\u2CF2\u2CF3\uA640-\uA66D\uA680-\uA69B\uA722-\uA76F\uA771-\uA787\uA78B-\uA78E\uAB70-\uABBF"
    "\uFB00-\uFB06\uFB13-\uFB17\uFF21-\uFF3A\uFF41-\uFF5A\U00010400-\U0001044F\U000104B0-\U000104D3"
    "\U000104D8-\U000104FB\U00010C80-\U00010CB2\U00010CC0-\U00010CF2\U000118A0-\U000118DF"
    "\U0001E900-\U0001E943"
    "]+";
// ASCII punctuation (and, as :-~ spans them, ASCII letters), full-width forms, quotes U+2018-U+201F, and
// U+3000-U+3002 (ideographic space, comma, full stop).
const char* const kPunctuation = "\\s?[!-/:-~\uFF01-\uFF0F\uFF1A-\uFF5E\u2018-\u201F\u3000-\u3002]+";
const char* const kTrailingSpace = "\\s+$";

}  // namespace

// CJK unified ideographs, U+0800-U+4E00 (the source's own range: everything from Samaritan up, kana included),
// and Hangul syllables through U+D7FF. DeepSeek-Coder's tokenizer.json (GGUF pre "deepseek-coder") has the same
// class, and llama.cpp lists it byte for byte the same for both pres.
const char* const kDeepseekCjkRegex = "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+";

namespace {

nlohmann::json split(const char* regex) {
  return {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}};
}

}  // namespace

// The digits come last as the tokenizer.json has them, Digits(individual_digits). llama.cpp spells that step
// "\p{N}+"; the models' vocabularies hold no merge across digits (they were trained on single digits), so
// both give the same ids there, and the tokenizer.json form keeps a GGUF file and its tokenizer.json in step
// on any vocabulary. One llama.cpp quirk is not copied: its std::wregex path turns non-ASCII whitespace into
// U+000B first, so U+3000 stops matching the punctuation class ("\u3000\u3000\u3002" splits in two there,
// not in tokenizers).
nlohmann::json deepseek_llm_pre_tokenizer() {
  nlohmann::json seq = nlohmann::json::array();
  for (const char* r : {kLineBreak, kLetters, kPunctuation, kTrailingSpace, kDeepseekCjkRegex}) seq.push_back(split(r));
  seq.push_back({{"type", "Digits"}, {"individual_digits", true}});
  seq.push_back({{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}});
  return {{"type", "Sequence"}, {"pretokenizers", seq}};
}

}  // namespace vireo
