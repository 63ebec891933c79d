#include "engine/pooling_config.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "gguf/gguf_file.h"
#include "model/model_config.h"
#include "model/safetensors.h"

namespace vireo {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

PoolingSpec::Type parse_type(const std::string& t, const std::string& source) {
  if (t == "LAST" || t == "last" || t == "lasttoken") return PoolingSpec::Type::kLast;
  if (t == "MEAN" || t == "mean") return PoolingSpec::Type::kMean;
  if (t == "CLS" || t == "cls") return PoolingSpec::Type::kCls;
  throw Error(source + ": pooling_type '" + t + "' is not supported (LAST, MEAN or CLS)");
}

json read_json(const fs::path& p) {
  std::ifstream in(p);
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw Error(p.string() + ": not valid JSON");
  return j;
}

// sentence-transformers' modules.json (Transformer, Pooling, [Dense,] Normalize); false when absent.
bool from_sentence_transformers(const fs::path& dir, PoolingSpec& spec) {
  const fs::path modules = dir / "modules.json";
  if (!fs::is_regular_file(modules)) return false;
  const json mods = read_json(modules);
  if (!mods.is_array()) throw Error(modules.string() + ": must be a list of modules");
  bool found = false;
  spec.normalize = false;
  for (const json& m : mods) {
    const std::string type = m.value("type", "");
    if (type.find("Normalize") != std::string::npos) spec.normalize = true;
    if (type.find("Pooling") == std::string::npos) continue;
    const fs::path cfg = dir / m.value("path", "1_Pooling") / "config.json";
    if (!fs::is_regular_file(cfg)) continue;
    const json c = read_json(cfg);
    if (c.value("pooling_mode_lasttoken", false)) spec.type = PoolingSpec::Type::kLast;
    else if (c.value("pooling_mode_mean_tokens", false)) spec.type = PoolingSpec::Type::kMean;
    else if (c.value("pooling_mode_cls_token", false)) spec.type = PoolingSpec::Type::kCls;
    else throw Error(cfg.string() + ": only lasttoken, mean_tokens or cls_token pooling is supported");
    found = true;
  }
  return found;
}

// The model folder's config.json with --hf-overrides merged in; null without one.
json model_config_json(const std::string& model_dir, const std::string& hf_overrides) {
  const fs::path cfg = fs::path(model_dir) / "config.json";
  if (model_dir.empty() || !fs::is_regular_file(cfg)) return json();
  json j = read_json(cfg);
  if (!hf_overrides.empty()) {
    const json o = json::parse(hf_overrides, nullptr, /*allow_exceptions=*/false);
    if (o.is_object()) j = ModelConfig::with_overrides(j, o);
  }
  return j;
}

std::string architecture_of(const json& j) {
  if (!j.is_object() || !j.contains("architectures") || !j["architectures"].is_array() || j["architectures"].empty() ||
      !j["architectures"][0].is_string())
    return "";
  return j["architectures"][0].get<std::string>();
}

// A GGUF file's `<arch>.pooling_type` (llama.cpp's embedding models: 1 mean, 2 cls, 3 last); nullopt for
// none (0), rank (4, a reranker head not read here) or not a GGUF file.
std::optional<PoolingSpec::Type> gguf_pooling(const std::string& path) {
  if (path.empty() || fs::is_directory(path) || !fs::is_regular_file(path) || !GgufFile::is_gguf(path)) return std::nullopt;
  const GgufFile f(path);
  const auto arch = f.get_string("general.architecture");
  const auto type = arch ? f.get_int(*arch + ".pooling_type") : std::nullopt;
  if (!type) return std::nullopt;
  switch (*type) {
    case 1: return PoolingSpec::Type::kMean;
    case 2: return PoolingSpec::Type::kCls;
    case 3: return PoolingSpec::Type::kLast;
    default: return std::nullopt;
  }
}

// vLLM's runner auto: a base model's architecture ("Qwen2Model", "MistralModel": no head to generate with)
// or a sequence classifier pools; a causal LM generates.
bool pooling_architecture(const json& j) {
  const std::string a = architecture_of(j);
  return (a.size() > 5 && a.ends_with("Model")) || a.ends_with("ForSequenceClassification");
}

// Row `id` of the [V, H] tensor `name` as F32 (read in place: only that row is converted).
std::vector<float> tensor_row(const Checkpoint& ckpt, const std::string& name, int64_t id) {
  auto shape = ckpt.shape(name);
  if (!shape || shape->size() != 2 || id < 0 || id >= (*shape)[0])
    throw Error(ckpt.dir() + ": " + name + " has no row " + std::to_string(id));
  const Tensor t = ckpt.get(name, *shape);
  const int64_t H = (*shape)[1];
  std::vector<float> row(static_cast<size_t>(H));
  convert_to_f32(static_cast<const char*>(t.data) + dtype_row_bytes(t.dtype, id * H), t.dtype, row.data(), row.size());
  return row;
}

// *ForSequenceClassification: score.weight from the checkpoint, or vLLM's classifier_from_token rows of the
// lm_head; labels from id2label (LABEL_i else).
void load_classifier(const std::string& model_dir, const json& j, PoolingSpec& spec,
                     const std::function<std::optional<int32_t>(const std::string&)>& token_id) {
  if (!architecture_of(j).ends_with("ForSequenceClassification")) return;
  Checkpoint ckpt(model_dir);
  int64_t labels = 0;
  if (auto from = j.find("classifier_from_token"); from != j.end() && !from->is_null()) {
    if (!from->is_array() || from->empty() || from->size() > 2 || !token_id)
      throw Error("classifier_from_token: expected one or two tokens, e.g. [\"no\", \"yes\"]");
    std::vector<int32_t> ids;
    for (const json& t : *from) {
      auto id = t.is_string() ? token_id(t.get<std::string>()) : std::nullopt;
      if (!id) throw Error("classifier_from_token: " + t.dump() + " is not one token of the tokenizer");
      ids.push_back(*id);
    }
    const std::string head = ckpt.has("lm_head.weight") ? "lm_head.weight" : "model.embed_tokens.weight";
    spec.classifier = tensor_row(ckpt, head, ids.back());
    if (ids.size() == 2) {  // softmax([no, yes])[yes] = sigmoid((row(yes) - row(no)) h)
      const std::vector<float> other = tensor_row(ckpt, head, ids[0]);
      for (size_t h = 0; h < other.size(); ++h) spec.classifier[h] -= other[h];
    }
    labels = 1;
  } else {
    auto shape = ckpt.shape("score.weight");
    if (!shape || shape->size() != 2)
      throw Error(model_dir + ": a sequence classifier needs score.weight [num_labels, hidden] (or classifier_from_token)");
    labels = (*shape)[0];
    spec.classifier.resize(static_cast<size_t>(labels * (*shape)[1]));
    ckpt.read("score.weight", *shape, DType::kF32, spec.classifier.data());
  }
  for (int64_t i = 0; i < labels; ++i) {
    std::string name = "LABEL_" + std::to_string(i);
    if (auto it = j.find("id2label"); it != j.end() && it->is_object() && it->contains(std::to_string(i)) &&
                                      (*it)[std::to_string(i)].is_string())
      name = (*it)[std::to_string(i)].get<std::string>();
    spec.labels.push_back(name);
  }
  spec.type = PoolingSpec::Type::kLast;  // vLLM's classifier pooling for decoder models
  spec.normalize = false;
}

}  // namespace

PoolingSpec resolve_pooling(const std::string& runner, const std::string& pooler_config, const std::string& model_dir,
                            const std::string& hf_overrides,
                            const std::function<std::optional<int32_t>(const std::string&)>& token_id) {
  PoolingSpec spec;
  if (runner != "generate" && runner != "auto" && runner != "pooling")
    throw Error("--runner '" + runner + "': expected auto, generate or pooling");
  const json cfg = model_config_json(model_dir, hf_overrides);
  const std::optional<PoolingSpec::Type> gguf = gguf_pooling(model_dir);
  const bool pooling = runner == "pooling" || (runner == "auto" && (!pooler_config.empty() || pooling_architecture(cfg) || gguf));
  if (!pooling) {
    if (!pooler_config.empty()) throw Error("--pooler-config needs --runner pooling");
    return spec;
  }
  spec.enabled = true;
  if (gguf) spec.type = *gguf;  // normalised, as llama.cpp's server does by default
  if (cfg.is_object()) {
    if (auto d = cfg.find("matryoshka_dimensions"); d != cfg.end() && d->is_array()) {
      for (const json& v : *d)
        if (v.is_number_integer() && v.get<int>() > 0) spec.matryoshka_dims.push_back(v.get<int>());
      spec.matryoshka = !spec.matryoshka_dims.empty();
    }
    if (auto m = cfg.find("is_matryoshka"); m != cfg.end() && m->is_boolean() && m->get<bool>()) spec.matryoshka = true;
  }
  const bool dir = !model_dir.empty() && fs::is_directory(model_dir);
  if (dir) load_classifier(model_dir, cfg, spec, token_id);
  if (!pooler_config.empty()) {
    const json j = json::parse(pooler_config, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) throw Error("--pooler-config: must be a JSON object, e.g. '{\"pooling_type\": \"MEAN\"}'");
    for (const auto& [k, v] : j.items())
      if (k != "pooling_type" && k != "normalize")
        throw Error("--pooler-config: '" + k + "' is not supported (pooling_type, normalize)");
    if (j.contains("pooling_type")) {
      if (!j["pooling_type"].is_string()) throw Error("--pooler-config: pooling_type must be a string");
      spec.type = parse_type(j["pooling_type"].get<std::string>(), "--pooler-config");
    }
    if (j.contains("normalize")) {
      if (!j["normalize"].is_boolean()) throw Error("--pooler-config: normalize must be true or false");
      spec.normalize = j["normalize"].get<bool>();
    }
    return spec;
  }
  if (dir && !spec.classifies()) from_sentence_transformers(model_dir, spec);
  return spec;
}

}  // namespace vireo
