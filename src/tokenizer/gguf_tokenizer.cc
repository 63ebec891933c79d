#include "tokenizer/gguf_tokenizer.h"

#include <filesystem>

#include "core/error.h"
#include "tokenizer/deepseek_coder_pre.h"
#include "tokenizer/deepseek_llm_pre.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/spm_merges.h"
#include "tokenizer/tokenizer_json.h"

namespace vireo {
namespace {

using nlohmann::json;

// llama.cpp's token types (llama_token_type): control and user-defined tokens are the added
// tokens of tokenizer.json (matched before pre-tokenization); control ones are special.
// Unknown-type tokens (SentencePiece's <unk>) are matched like control ones, as llama.cpp does.
constexpr int kUnknown = 2, kControl = 3, kUserDefined = 4;

// The Split regexes of the tokenizer.json files llama.cpp recognises by tokenizer.ggml.pre.
const char* const kLlama3Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";
// o200k (GPT-4o, gpt-oss; llama.cpp's pre "gpt-4o"): cased words with contractions, numbers of 1-3 digits.
const char* const kGpt4oRegex =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// DeepSeek-V3 / R1 (llama.cpp's pre "deepseek-v3"; HunYuan dense's "hunyuan-dense" shares it): three
// Splits in a row, as their tokenizer.json has them: digits in runs of 1-3, CJK runs, then words /
// punctuation / whitespace.
const char* const kDeepseek3Regexes[] = {
    "\\p{N}{1,3}", "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
    "?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"};
const char* const kQwen2Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";

// Tekken (Mistral NeMo, Mistral Small 3.x, Pixtral; llama.cpp's pre "tekken"): o200k's cased words without the
// contractions, single digits, as their tokenizer.json has it.
const char* const kTekkenRegex =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// Seed-Coder / Seed-OSS (llama.cpp's pre "seed-coder"): Llama-3's split with single digits, and punctuation runs
// that stop at line breaks, as their tokenizer.json has it.
const char* const kSeedCoderRegex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";

// Qwen3.5 / 3.6 (llama.cpp's pre "qwen35"): Qwen2's split with combining marks (\p{M}) kept in words and
// out of punctuation runs, as their tokenizer.json has it.
const char* const kQwen35Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// What distinguishes the tokenizer.json of one GGUF tokenizer family from another.
struct Pipeline {
  json normalizer, pre_tokenizer, decoder;
  json model;                    // BPE model options (vocab and merges come separately)
  bool add_bos = false;          // llama.cpp's default when tokenizer.ggml.add_bos_token is absent
  bool added_in_vocab = false;   // control/user-defined tokens also in model.vocab (SentencePiece files)
  std::string tokenizer_class;   // tokenizer_config.json's, when HfTokenizer should rebuild as transformers does
};

json bpe_model(bool ignore_merges, json unk, bool byte_fallback) {
  return {{"type", "BPE"},         {"unk_token", std::move(unk)}, {"fuse_unk", byte_fallback},
          {"byte_fallback", byte_fallback}, {"ignore_merges", ignore_merges}, {"vocab", json::object()},
          {"merges", json::array()}};
}

json split(const char* regex) {
  return {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}};
}
json byte_level_no_regex() {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
}

json split_then_bytes(const char* regex) {
  return {{"type", "Sequence"}, {"pretokenizers", {split(regex), byte_level_no_regex()}}};
}

// tokenizer.ggml.model "gpt2": byte-level BPE, the split regex picked by tokenizer.ggml.pre.
Pipeline byte_level_pipeline(const GgufFile& f) {
  const std::string pre = f.get_string("tokenizer.ggml.pre").value_or("default");
  Pipeline s;
  s.decoder = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
  s.model = bpe_model(false, nullptr, false);
  if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3" || pre == "falcon3" || pre == "lfm2") {
    s.pre_tokenizer = split_then_bytes(kLlama3Regex);
    s.model["ignore_merges"] = true;  // Llama-3's tokenizer.json: whole words in the vocab skip the merges
    s.add_bos = true;
  } else if (pre == "dbrx" || pre == "smaug-bpe" || pre == "glm4" || pre == "chatglm-bpe") {
    // llama.cpp splits these with Llama-3's regex too (GLM-4's CHATGLM4 spells it with explicit cases)
    s.pre_tokenizer = split_then_bytes(kLlama3Regex);
  } else if (pre == "qwen2" || pre == "deepseek-r1-qwen") {
    s.normalizer = {{"type", "NFC"}};
    s.pre_tokenizer = split_then_bytes(kQwen2Regex);
  } else if (pre == "hunyuan") {  // Hunyuan-A13B (tiktoken ranks, no normaliser): Qwen2's split in llama.cpp
    s.pre_tokenizer = split_then_bytes(kQwen2Regex);
  } else if (pre == "qwen35") {
    s.normalizer = {{"type", "NFC"}};
    s.pre_tokenizer = split_then_bytes(kQwen35Regex);
  } else if (pre == "deepseek-v3" || pre == "hunyuan-dense") {
    json seq = json::array();
    for (const char* r : kDeepseek3Regexes) seq.push_back(split(r));
    seq.push_back(byte_level_no_regex());
    s.pre_tokenizer = {{"type", "Sequence"}, {"pretokenizers", seq}};
  } else if (pre == "deepseek-llm") {  // DeepSeek-LLM 7B / 67B, DeepSeek-V2 / V2-Lite, as their tokenizer.json
    s.pre_tokenizer = deepseek_llm_pre_tokenizer();
  } else if (pre == "deepseek-coder") {  // DeepSeek-Coder 1.3B / 6.7B / 33B, as their tokenizer.json
    s.pre_tokenizer = deepseek_coder_pre_tokenizer();
  } else if (pre == "gpt-4o" || pre == "gpt-oss") {
    s.pre_tokenizer = split_then_bytes(kGpt4oRegex);
    s.model["ignore_merges"] = true;  // o200k's tokenizer.json
  } else if (pre == "seed-coder") {
    s.pre_tokenizer = split_then_bytes(kSeedCoderRegex);
  } else if (pre == "tekken") {
    s.pre_tokenizer = split_then_bytes(kTekkenRegex);
    s.model["ignore_merges"] = true;  // llama.cpp sets both for tekken
    s.add_bos = true;
  } else if (pre == "starcoder" || pre == "refact" || pre == "command-r" || pre == "smollm" || pre == "codeshell" ||
             pre == "exaone" || pre == "minerva-7b") {
    // Every digit apart, then GPT-2's split (HF: Digits(individual_digits) + ByteLevel with its regex), as
    // llama.cpp runs these pres (StarCoder, Granite, Command-R, SmolLM, EXAONE 3).
    json digits = split("\\p{N}");
    json bytes = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", true}};
    s.pre_tokenizer = {{"type", "Sequence"}, {"pretokenizers", {digits, bytes}}};
  } else if (pre == "default" || pre == "gpt-2" || pre == "gpt2" || pre == "olmo" || pre == "exaone4") {
    // GPT-2's own byte-level split (HF GPT-2; llama.cpp's OLMO type, OLMo / OLMoE, shares its regex, and it
    // maps EXAONE 4's "exaone4" to its GPT2 type); llama.cpp's "default" is a legacy approximation of it.
    s.pre_tokenizer = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", true}};
  } else {
    throw Error(f.path() + ": tokenizer.ggml.pre '" + pre +
                "' is not supported (llama-bpe, lfm2, dbrx, smaug-bpe, glm4, chatglm-bpe, qwen2, qwen35, deepseek-r1-qwen, "
                "deepseek-llm, deepseek-coder, deepseek-v3, hunyuan-dense, hunyuan, gpt-4o, tekken, seed-coder, starcoder, refact, command-r, smollm, codeshell, exaone, "
                "minerva-7b, gpt-2, olmo, exaone4, default); pass "
                "--tokenizer with the model's Hugging Face tokenizer directory");
  }
  return s;
}

// tokenizer.ggml.model "llama": SentencePiece BPE with byte fallback, spaces as U+2581, as the
// Llama-2 tokenizer.json; HfTokenizer rebuilds it as transformers 5's LlamaTokenizer does.
Pipeline sentencepiece_pipeline(const GgufFile& f, const json& unk) {
  Pipeline s;
  const char* const space = "\xE2\x96\x81";
  json replace = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", space}};
  if (f.get_bool("tokenizer.ggml.add_space_prefix").value_or(true)) {
    s.normalizer = {{"type", "Sequence"}, {"normalizers", {{{"type", "Prepend"}, {"prepend", space}}, replace}}};
    s.tokenizer_class = "LlamaTokenizer";
  } else {
    s.normalizer = replace;
  }
  s.decoder = {{"type", "Sequence"},
               {"decoders",
                {{{"type", "Replace"}, {"pattern", {{"String", space}}}, {"content", " "}},
                 {{"type", "ByteFallback"}},
                 {{"type", "Fuse"}},
                 {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
  s.model = bpe_model(false, unk, true);
  s.add_bos = true;
  s.added_in_vocab = true;
  return s;
}

std::optional<std::string> token_of(const GgufFile& f, const json& tokens, const char* key) {
  auto id = f.get_int(key);
  if (!id) return std::nullopt;
  if (*id < 0 || *id >= static_cast<int64_t>(tokens.size()))
    throw Error(f.path() + ": metadata '" + std::string(key) + "' = " + std::to_string(*id) + " is not a token id");
  return tokens[*id].get<std::string>();
}

}  // namespace

bool is_gguf_tokenizer_path(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec) && GgufFile::is_gguf(path);
}

std::unique_ptr<Tokenizer> tokenizer_from_gguf(const GgufFile& f) {
  const auto model = f.get_string("tokenizer.ggml.model");
  if (!model) throw Error(f.path() + ": metadata 'tokenizer.ggml.model' is missing (no tokenizer in this GGUF file)");
  if (*model != "gpt2" && *model != "llama")
    throw Error(f.path() + ": tokenizer.ggml.model '" + *model +
                "' is not supported (gpt2: byte-level BPE, llama: SentencePiece BPE); pass --tokenizer with the "
                "model's Hugging Face tokenizer directory");
  const json* tokens = f.get_array("tokenizer.ggml.tokens", GgufType::kString);
  if (!tokens || tokens->empty()) throw Error(f.path() + ": metadata 'tokenizer.ggml.tokens' is missing or empty");
  const json* types = f.get_array("tokenizer.ggml.token_type", GgufType::kI32);
  if (types && types->size() != tokens->size())
    throw Error(f.path() + ": metadata 'tokenizer.ggml.token_type' has " + std::to_string(types->size()) +
                " entries for " + std::to_string(tokens->size()) + " tokens");
  const bool spm = *model == "llama";
  std::optional<std::string> unk = token_of(f, *tokens, "tokenizer.ggml.unknown_token_id");
  const Pipeline pipe = spm ? sentencepiece_pipeline(f, unk ? json(*unk) : json(nullptr)) : byte_level_pipeline(f);

  // tokenizer.json, with vocab and merges handed over as vectors (as load_tokenizer_json streams them).
  TokenizerJson tj;
  tj.captured = true;
  json added = json::array();
  std::vector<std::string> pieces;
  for (size_t id = 0; id < tokens->size(); ++id) {
    std::string tok = (*tokens)[id].get<std::string>();
    const int type = types ? (*types)[id].get<int>() : 1;
    const bool is_added = type == kControl || type == kUserDefined || type == kUnknown;
    if (is_added)
      added.push_back({{"id", id}, {"content", tok}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                       {"normalized", false}, {"special", type != kUserDefined}});
    if (spm) pieces.push_back(tok);
    if (!is_added || pipe.added_in_vocab) tj.vocab.emplace_back(std::move(tok), static_cast<int32_t>(id));
  }
  if (spm) {
    const json* scores = f.get_array("tokenizer.ggml.scores", GgufType::kF32);
    if (!scores || scores->size() != tokens->size())
      throw Error(f.path() + ": metadata 'tokenizer.ggml.scores' is missing or not one score per token");
    tj.merges = spm_merges(pieces, scores->get<std::vector<float>>());
  } else {
    const json* merges = f.get_array("tokenizer.ggml.merges", GgufType::kString);
    if (!merges) throw Error(f.path() + ": metadata 'tokenizer.ggml.merges' is missing");
    tj.merges.reserve(merges->size());
    for (const auto& m : *merges) {
      const std::string& s = m.get_ref<const std::string&>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        throw Error(f.path() + ": metadata 'tokenizer.ggml.merges' has a bad merge '" + s + "'");
      tj.merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    }
  }
  const auto bos = token_of(f, *tokens, "tokenizer.ggml.bos_token_id");
  const auto eos = token_of(f, *tokens, "tokenizer.ggml.eos_token_id");
  const bool add_bos = f.get_bool("tokenizer.ggml.add_bos_token").value_or(pipe.add_bos) && bos;
  const bool add_eos = f.get_bool("tokenizer.ggml.add_eos_token").value_or(false) && eos;
  json post = nullptr;
  if (add_bos || add_eos) {
    json single = json::array(), specials = json::object();
    auto special = [&](const std::string& name, const char* key) {
      const int64_t id = *f.get_int(key);
      single.push_back({{"SpecialToken", {{"id", name}, {"type_id", 0}}}});
      specials[name] = {{"id", name}, {"ids", {id}}, {"tokens", {name}}};
    };
    if (add_bos) special(*bos, "tokenizer.ggml.bos_token_id");
    single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
    if (add_eos) special(*eos, "tokenizer.ggml.eos_token_id");
    post = {{"type", "TemplateProcessing"}, {"single", single}, {"special_tokens", specials}};
  }
  tj.doc = {{"model", pipe.model},           {"normalizer", pipe.normalizer}, {"pre_tokenizer", pipe.pre_tokenizer},
            {"decoder", pipe.decoder},       {"post_processor", post},        {"added_tokens", added}};

  json config = json::object();
  if (bos) config["bos_token"] = *bos;
  if (eos) config["eos_token"] = *eos;
  if (auto pad = token_of(f, *tokens, "tokenizer.ggml.padding_token_id")) config["pad_token"] = *pad;
  if (unk) config["unk_token"] = *unk;
  if (!pipe.tokenizer_class.empty()) config["tokenizer_class"] = pipe.tokenizer_class;
  if (auto tmpl = f.get_string("tokenizer.chat_template")) config["chat_template"] = *tmpl;
  try {
    return std::make_unique<HfTokenizer>(tj, config, f.path() + " (tokenizer.ggml metadata)");
  } catch (const nlohmann::json::exception& e) {
    throw Error(f.path() + ": tokenizer metadata: " + e.what());
  }
}

}  // namespace vireo
