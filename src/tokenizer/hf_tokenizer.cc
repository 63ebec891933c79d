#include "tokenizer/hf_tokenizer.h"

#include <filesystem>

#include "core/error.h"
#include "tokenizer/gguf_tokenizer.h"
#include "tokenizer/utf8.h"

namespace vireo {

namespace {

const char* const kMetaspace = "\xE2\x96\x81";  // U+2581

bool mentions_byte_level(const nlohmann::json& j) {
  return !j.is_null() && j.dump().find("\"ByteLevel\"") != std::string::npos;
}

// bos_token / eos_token: a string, an AddedToken dict ({"content": ...}), or null.
std::optional<std::string> token_field(const nlohmann::json& config, const char* key) {
  if (!config.is_object()) return std::nullopt;
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content")) return it->at("content").get<std::string>();
  return std::nullopt;
}

}  // namespace

HfTokenizer::HfTokenizer(TokenizerJson& tj, const nlohmann::json& config, const std::string& what) {
  const nlohmann::json& tok = tj.doc;
  if (!tok.is_object() || !tok.contains("model") || !tok.at("model").is_object())
    throw Error(what + ": no \"model\" object");
  bool streamed = tj.captured && !tj.vocab.empty();
  model_ = std::make_unique<BpeModel>(tok.at("model"), what, streamed ? &tj.vocab : nullptr,
                                      streamed ? &tj.merges : nullptr);
  normalizer_ = make_normalizer(tok.value("normalizer", nlohmann::json()), what);
  pre_tokenizer_ = make_pre_tokenizer(tok.value("pre_tokenizer", nlohmann::json()), what);
  decoder_ = make_decoder(tok.value("decoder", nlohmann::json()), what);
  post_ = std::make_unique<PostProcessor>(tok.value("post_processor", nlohmann::json()), what);

  // transformers 5's LlamaTokenizer (tokenizer_class LlamaTokenizer[Fast]) rebuilds a SentencePiece
  // tokenizer.json's pipeline: no normalizer, Metaspace(prepend "always", no split), the Llama
  // decoder, and no unk token. It does so for ByteLevel files too, which breaks them
  // (transformers#45488: DeepSeek-V3 loses its spaces); there we keep tokenizer.json's pipeline,
  // as PreTrainedTokenizerFast and transformers 4 do.
  std::string cls = config.is_object() ? config.value("tokenizer_class", "") : "";
  bool byte_level = mentions_byte_level(tok.value("pre_tokenizer", nlohmann::json())) ||
                    mentions_byte_level(tok.value("decoder", nlohmann::json()));
  if ((cls == "LlamaTokenizer" || cls == "LlamaTokenizerFast") && !byte_level) {
    normalizer_.reset();
    pre_tokenizer_ = make_metaspace(kMetaspace, "always", false);
    decoder_ = make_decoder(nlohmann::json::parse(R"({"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]})"),
                            what);
    model_->clear_unk_token();
  }

  if (tok.contains("added_tokens")) {
    for (const auto& a : tok.at("added_tokens")) {
      AddedToken t;
      t.id = a.at("id").get<int32_t>();
      t.content = a.at("content").get<std::string>();
      t.single_word = a.value("single_word", false);
      t.lstrip = a.value("lstrip", false);
      t.rstrip = a.value("rstrip", false);
      t.normalized = a.value("normalized", false);
      t.special = a.value("special", false);
      added_.add(std::move(t));
    }
  }
  added_.build(normalizer_.get());
  // transformers 5 counts the tokens named in tokenizer_config.json as special (skipped by
  // decode(skip_special_tokens=True)) even where tokenizer.json says otherwise; GemmaTokenizer's
  // mask_token defaults to "<mask>".
  if (config.is_object()) {
    for (const char* key : {"bos_token", "eos_token", "unk_token", "pad_token", "mask_token", "sep_token", "cls_token"})
      if (auto t = token_field(config, key)) added_.mark_special(*t);
    for (const char* key : {"additional_special_tokens", "extra_special_tokens"}) {
      auto it = config.find(key);
      if (it == config.end()) continue;
      for (const auto& v : *it) {
        if (v.is_string()) added_.mark_special(v.get<std::string>());
        if (v.is_object() && v.contains("content")) added_.mark_special(v.at("content").get<std::string>());
      }
    }
    if ((cls == "GemmaTokenizer" || cls == "GemmaTokenizerFast") && !config.contains("mask_token"))
      added_.mark_special("<mask>");
  }
  vocab_size_ = std::max(model_->max_id(), added_.max_id()) + 1;

  bos_ = token_field(config, "bos_token");
  eos_ = token_field(config, "eos_token");
  if (config.is_object() && config.contains("chat_template")) {
    const auto& ct = config.at("chat_template");
    if (ct.is_string()) {
      chat_template_ = ct.get<std::string>();
    } else if (ct.is_array()) {  // [{"name": ..., "template": ...}]: take "default"
      for (const auto& e : ct)
        if (e.value("name", "") == "default") chat_template_ = e.value("template", "");
      if (chat_template_.empty() && !ct.empty()) chat_template_ = ct.at(0).value("template", "");
    }
  }
}

void HfTokenizer::encode_plain(std::string_view text, bool at_start, std::vector<int32_t>& out) const {
  std::string s(text);
  if (normalizer_) normalizer_->normalize(s);
  std::vector<TextSplit> splits;
  if (added_.has_normalized_tokens()) {
    splits = added_.split(s, true);
  } else if (!s.empty()) {
    splits.push_back({0, s.size(), -1});
  }
  std::vector<PreToken> pieces;
  for (const auto& sp : splits) {
    if (sp.token_id >= 0) {
      out.push_back(sp.token_id);
      continue;
    }
    pieces.assign(1, PreToken{s.substr(sp.begin, sp.end - sp.begin), at_start && sp.begin == 0});
    if (pre_tokenizer_) pre_tokenizer_->apply(pieces);
    for (const auto& p : pieces) model_->tokenize(p.text, out);
  }
}

std::vector<int32_t> HfTokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::string repaired;
  if (!utf8::is_valid(text)) {  // tokenizers only sees valid str; repair like errors="replace"
    repaired = utf8::lossy(text);
    text = repaired;
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  for (const auto& sp : added_.split(text, false)) {
    if (sp.token_id >= 0) {
      ids.push_back(sp.token_id);
    } else {
      encode_plain(text.substr(sp.begin, sp.end - sp.begin), sp.begin == 0, ids);
    }
  }
  if (add_special_tokens) return post_->apply(std::move(ids));
  return ids;
}

std::string HfTokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (const AddedToken* t = added_.by_id(id)) {
      if (skip_special_tokens && t->special) continue;
      tokens.push_back(t->content);
    } else if (const std::string* s = model_->id_to_token(id)) {
      tokens.push_back(*s);
    }
  }
  if (!decoder_) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
    return out;
  }
  decoder_->decode_chain(tokens);
  std::string out;
  for (auto& t : tokens) out += t;
  return out;
}

std::optional<int32_t> HfTokenizer::token_to_id(std::string_view token) const {
  if (auto id = added_.by_content(token)) return id;
  return model_->token_to_id(token);
}

std::string HfTokenizer::id_to_token(int32_t id) const {
  if (const AddedToken* t = added_.by_id(id)) return t->content;
  if (const std::string* s = model_->id_to_token(id)) return *s;
  return "";
}

bool HfTokenizer::is_special(int32_t id) const {
  const AddedToken* t = added_.by_id(id);
  return t && t->special;
}

namespace {

nlohmann::json parse_json(const std::string& path) {
  std::string text = read_whole_file(path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": malformed JSON: " + e.what());
  }
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_dir(const std::string& path) {
  namespace fs = std::filesystem;
  // A GGUF file by magic, or by name (then GgufFile says what is wrong with it).
  if (is_gguf_tokenizer_path(path) || fs::path(path).extension() == ".gguf") return tokenizer_from_gguf(GgufFile(path));
  std::string dir = path;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (fs::is_regular_file(dir) && fs::path(dir).filename() == "tokenizer.json")  // the file itself
    dir = fs::path(dir).parent_path().string();
  if (dir.empty()) dir = ".";
  std::string tok_path = dir + "/tokenizer.json";
  if (!fs::exists(tok_path)) throw Error(tok_path + ": not found");
  TokenizerJson tok = load_tokenizer_json(tok_path);
  nlohmann::json config;
  std::string config_path = dir + "/tokenizer_config.json";
  if (fs::exists(config_path)) config = parse_json(config_path);
  std::unique_ptr<HfTokenizer> t;
  try {
    t = std::make_unique<HfTokenizer>(tok, config, tok_path);
  } catch (const nlohmann::json::exception& e) {
    throw Error(tok_path + ": unexpected content: " + e.what());
  }
  // Newer checkpoints keep the template in its own file; multimodal ones (Gemma 3, Qwen2-VL) in the
  // processor's chat_template.json, which vLLM falls back to as well.
  if (t->chat_template().empty() && fs::exists(dir + "/chat_template.jinja"))
    t->set_chat_template(read_whole_file(dir + "/chat_template.jinja"));
  if (t->chat_template().empty() && fs::exists(dir + "/chat_template.json")) {
    const nlohmann::json j = parse_json(dir + "/chat_template.json");
    if (j.is_object() && j.contains("chat_template") && j["chat_template"].is_string())
      t->set_chat_template(j["chat_template"].get<std::string>());
  }
  return t;
}

}  // namespace vireo
