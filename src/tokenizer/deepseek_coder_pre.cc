#include "tokenizer/deepseek_coder_pre.h"

#include "tokenizer/deepseek_llm_pre.h"

namespace vireo {
namespace {

// The Split regexes in order, as llama.cpp's src/llama-vocab.cpp lists them (LLAMA_VOCAB_PRE_TYPE_DEEPSEEK_CODER,
// copied there from the models' tokenizer.json): "[\r\n]", "\s?\p{L}+", "\s?\p{P}+", the CJK / Hangul class
// (the very one of "deepseek-llm", kDeepseekCjkRegex), then "\p{N}". Unlike DeepSeek-LLM's there is no
// trailing-whitespace Split and the classes are Unicode categories, so symbols (\p{S}: + = < > $ ^ | ~ `, emoji)
// stay in the text between matches, with any whitespace around them.
const char* const kLineBreak = "[\r\n]";
const char* const kLetters = "\\s?\\p{L}+";
const char* const kPunctuation = "\\s?\\p{P}+";

nlohmann::json split(const char* regex) {
  return {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}};
}

}  // namespace

// The digits come last, as the tokenizer.json has them: Digits(individual_digits), which isolates every \p{N}
// character, the same split as llama.cpp's "\p{N}". llama.cpp sets no BOS default for this pre (the GGUF
// file's tokenizer.ggml.add_bos_token decides), only clean_spaces = false, and Vireo's decoding never cleans up
// spaces.
nlohmann::json deepseek_coder_pre_tokenizer() {
  nlohmann::json seq = nlohmann::json::array();
  for (const char* r : {kLineBreak, kLetters, kPunctuation, kDeepseekCjkRegex}) seq.push_back(split(r));
  seq.push_back({{"type", "Digits"}, {"individual_digits", true}});
  seq.push_back({{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}});
  return {{"type", "Sequence"}, {"pretokenizers", seq}};
}

}  // namespace vireo
