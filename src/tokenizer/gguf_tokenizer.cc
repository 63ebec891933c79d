#include "tokenizer/gguf_tokenizer.h"

#include <filesystem>

#include "core/error.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tokenizer_json.h"

namespace vireo {
namespace {

using nlohmann::json;

// llama.cpp's token types (llama_token_type): control and user-defined tokens are the added
// tokens of tokenizer.json (matched before pre-tokenization); control ones are special.
constexpr int kControl = 3, kUserDefined = 4;

// The Split regexes of the tokenizer.json files llama.cpp recognises by tokenizer.ggml.pre.
const char* const kLlama3Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";
const char* const kQwen2Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";

struct PreTokenizerSpec {
  json normalizer, pre_tokenizer;
  bool ignore_merges = false, add_bos = false;  // llama.cpp's defaults for the pre type
};

json split_then_bytes(const char* regex) {
  return {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}},
            {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}}}};
}

PreTokenizerSpec pre_tokenizer_for(const GgufFile& f) {
  const std::string pre = f.get_string("tokenizer.ggml.pre").value_or("default");
  PreTokenizerSpec s;
  if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3" || pre == "falcon3") {
    s.pre_tokenizer = split_then_bytes(kLlama3Regex);
    s.ignore_merges = true;  // Llama-3's tokenizer.json: whole words in the vocab skip the merges
    s.add_bos = true;
  } else if (pre == "dbrx" || pre == "smaug-bpe") {  // llama.cpp splits these with Llama-3's regex too
    s.pre_tokenizer = split_then_bytes(kLlama3Regex);
  } else if (pre == "qwen2" || pre == "deepseek-r1-qwen") {
    s.normalizer = {{"type", "NFC"}};
    s.pre_tokenizer = split_then_bytes(kQwen2Regex);
  } else if (pre == "default" || pre == "gpt-2" || pre == "gpt2") {
    // GPT-2's own byte-level split (HF GPT-2); llama.cpp's "default" is a legacy approximation of it.
    s.pre_tokenizer = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", true}};
  } else {
    throw Error(f.path() + ": tokenizer.ggml.pre '" + pre +
                "' is not supported (llama-bpe, dbrx, smaug-bpe, qwen2, deepseek-r1-qwen, gpt-2, default); pass "
                "--tokenizer with the model's Hugging Face tokenizer directory");
  }
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
  if (*model != "gpt2")
    throw Error(f.path() + ": tokenizer.ggml.model '" + *model + "' is not supported (only 'gpt2', byte-level BPE" +
                (*model == "llama" ? "; SentencePiece is not" : "") +
                "); pass --tokenizer with the model's Hugging Face tokenizer directory");
  const json* tokens = f.get_array("tokenizer.ggml.tokens", GgufType::kString);
  if (!tokens || tokens->empty()) throw Error(f.path() + ": metadata 'tokenizer.ggml.tokens' is missing or empty");
  const json* types = f.get_array("tokenizer.ggml.token_type", GgufType::kI32);
  if (types && types->size() != tokens->size())
    throw Error(f.path() + ": metadata 'tokenizer.ggml.token_type' has " + std::to_string(types->size()) +
                " entries for " + std::to_string(tokens->size()) + " tokens");
  const json* merges = f.get_array("tokenizer.ggml.merges", GgufType::kString);
  if (!merges) throw Error(f.path() + ": metadata 'tokenizer.ggml.merges' is missing");
  const PreTokenizerSpec pre = pre_tokenizer_for(f);

  // tokenizer.json, with vocab and merges handed over as vectors (as load_tokenizer_json streams them).
  TokenizerJson tj;
  tj.captured = true;
  json added = json::array();
  for (size_t id = 0; id < tokens->size(); ++id) {
    std::string tok = (*tokens)[id].get<std::string>();
    const int type = types ? (*types)[id].get<int>() : 1;
    if (type == kControl || type == kUserDefined) {
      added.push_back({{"id", id}, {"content", tok}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                       {"normalized", false}, {"special", type == kControl}});
    } else {
      tj.vocab.emplace_back(std::move(tok), static_cast<int32_t>(id));
    }
  }
  tj.merges.reserve(merges->size());
  for (const auto& m : *merges) {
    const std::string& s = m.get_ref<const std::string&>();
    const size_t sp = s.find(' ');
    if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
      throw Error(f.path() + ": metadata 'tokenizer.ggml.merges' has a bad merge '" + s + "'");
    tj.merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
  }
  const auto bos = token_of(f, *tokens, "tokenizer.ggml.bos_token_id");
  const auto eos = token_of(f, *tokens, "tokenizer.ggml.eos_token_id");
  const bool add_bos = f.get_bool("tokenizer.ggml.add_bos_token").value_or(pre.add_bos) && bos;
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
  tj.doc = {{"model",
             {{"type", "BPE"}, {"unk_token", nullptr}, {"fuse_unk", false}, {"byte_fallback", false},
              {"ignore_merges", pre.ignore_merges}, {"vocab", json::object()}, {"merges", json::array()}}},
            {"normalizer", pre.normalizer},
            {"pre_tokenizer", pre.pre_tokenizer},
            {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}},
            {"post_processor", post},
            {"added_tokens", added}};

  json config = json::object();
  if (bos) config["bos_token"] = *bos;
  if (eos) config["eos_token"] = *eos;
  if (auto pad = token_of(f, *tokens, "tokenizer.ggml.padding_token_id")) config["pad_token"] = *pad;
  if (auto unk = token_of(f, *tokens, "tokenizer.ggml.unknown_token_id")) config["unk_token"] = *unk;
  if (auto tmpl = f.get_string("tokenizer.chat_template")) config["chat_template"] = *tmpl;
  try {
    return std::make_unique<HfTokenizer>(tj, config, f.path() + " (tokenizer.ggml metadata)");
  } catch (const nlohmann::json::exception& e) {
    throw Error(f.path() + ": tokenizer metadata: " + e.what());
  }
}

}  // namespace vireo
