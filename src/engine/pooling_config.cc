#include "engine/pooling_config.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
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

// vLLM's runner auto: a base model's architecture ("Qwen2Model", "MistralModel": no head to generate with)
// pools; a causal LM generates.
bool base_model_architecture(const std::string& model_dir) {
  const fs::path cfg = fs::path(model_dir) / "config.json";
  if (model_dir.empty() || !fs::is_regular_file(cfg)) return false;
  const json j = read_json(cfg);
  if (!j.is_object() || !j.contains("architectures") || !j["architectures"].is_array() || j["architectures"].empty() ||
      !j["architectures"][0].is_string())
    return false;
  const std::string a = j["architectures"][0].get<std::string>();
  return (a.size() > 5 && a.ends_with("Model")) || a.ends_with("ForSequenceClassification");
}

// *ForSequenceClassification: score.weight from the checkpoint, labels from id2label (LABEL_i else).
void load_classifier(const std::string& model_dir, PoolingSpec& spec) {
  const fs::path cfg = fs::path(model_dir) / "config.json";
  if (model_dir.empty() || !fs::is_regular_file(cfg)) return;
  const json j = read_json(cfg);
  const bool seq_cls = j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
                       j["architectures"][0].is_string() &&
                       j["architectures"][0].get<std::string>().ends_with("ForSequenceClassification");
  if (!seq_cls) return;
  Checkpoint ckpt(model_dir);
  auto shape = ckpt.shape("score.weight");
  if (!shape || shape->size() != 2) throw Error(model_dir + ": a sequence classifier needs score.weight [num_labels, hidden]");
  const int64_t labels = (*shape)[0], hidden = (*shape)[1];
  spec.classifier.resize(static_cast<size_t>(labels * hidden));
  ckpt.read("score.weight", *shape, DType::kF32, spec.classifier.data());
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

PoolingSpec resolve_pooling(const std::string& runner, const std::string& pooler_config, const std::string& model_dir) {
  PoolingSpec spec;
  if (runner != "generate" && runner != "auto" && runner != "pooling")
    throw Error("--runner '" + runner + "': expected auto, generate or pooling");
  const bool pooling =
      runner == "pooling" || (runner == "auto" && (!pooler_config.empty() || base_model_architecture(model_dir)));
  if (!pooling) {
    if (!pooler_config.empty()) throw Error("--pooler-config needs --runner pooling");
    return spec;
  }
  spec.enabled = true;
  const bool dir = !model_dir.empty() && fs::is_directory(model_dir);
  if (dir) load_classifier(model_dir, spec);
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
