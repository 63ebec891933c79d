#include "model/lora_adapter.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>

#include "core/dtype.h"
#include "core/error.h"
#include "model/safetensors.h"

namespace vireo {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// PEFT's rank_pattern / alpha_pattern lookup: the first key k with re.match("(.*\.)?(k)$", module).
std::optional<double> pattern_value(const json& patterns, const std::string& module, const std::string& source) {
  if (!patterns.is_object()) return std::nullopt;
  for (const auto& [key, value] : patterns.items()) {
    if (!value.is_number()) throw Error(source + ": pattern '" + key + "' must map to a number, got " + value.dump());
    try {
      if (std::regex_match(module, std::regex("(.*\\.)?(" + key + ")"))) return value.get<double>();
    } catch (const std::regex_error&) {
      if (module == key || (module.size() > key.size() && module.ends_with("." + key))) return value.get<double>();
    }
  }
  return std::nullopt;
}

struct Pair {
  std::string a, b;  // tensor names
};

}  // namespace

LoraAdapter load_lora_adapter(const std::string& dir, int max_rank) {
  const fs::path root(dir);
  const fs::path cfg_path = root / "adapter_config.json";
  if (!fs::is_regular_file(cfg_path)) throw Error("LoRA adapter " + dir + ": no adapter_config.json");
  const std::string src = cfg_path.string();
  json cfg;
  try {
    std::ifstream in(cfg_path);
    cfg = json::parse(in);
  } catch (const json::exception& e) {
    throw Error(src + ": not valid JSON (" + std::string(e.what()) + ")");
  }
  if (!cfg.is_object()) throw Error(src + ": must hold a JSON object");
  auto flag = [&](const char* key) {
    auto it = cfg.find(key);
    return it != cfg.end() && it->is_boolean() && it->get<bool>();
  };
  if (cfg.contains("peft_type") && cfg["peft_type"].is_string() && cfg["peft_type"] != "LORA")
    throw Error(src + ": peft_type " + cfg["peft_type"].dump() + " is not LORA");
  if (flag("use_dora")) throw Error(src + ": use_dora (DoRA) is not supported");
  if (flag("fan_in_fan_out")) throw Error(src + ": fan_in_fan_out (GPT-2 Conv1D layout) is not supported");
  if (cfg.contains("bias") && cfg["bias"].is_string() && cfg["bias"] != "none")
    throw Error(src + ": bias " + cfg["bias"].dump() + " is not supported (only \"none\")");
  if (cfg.contains("modules_to_save") && cfg["modules_to_save"].is_array() && !cfg["modules_to_save"].empty())
    throw Error(src + ": modules_to_save " + cfg["modules_to_save"].dump() + " is not supported");
  const double alpha = cfg.contains("lora_alpha") && cfg["lora_alpha"].is_number() ? cfg["lora_alpha"].get<double>() : 8.0;
  const bool rslora = flag("use_rslora");
  const json alpha_pattern = cfg.value("alpha_pattern", json::object());

  const fs::path weights = root / "adapter_model.safetensors";
  if (!fs::is_regular_file(weights)) {
    if (fs::is_regular_file(root / "adapter_model.bin"))
      throw Error("LoRA adapter " + dir + ": adapter_model.bin (a pickle) is not read; save it as safetensors");
    throw Error("LoRA adapter " + dir + ": no adapter_model.safetensors");
  }
  SafetensorsFile file(weights.string());

  // base_model.model.model.layers.3.self_attn.q_proj.lora_A[.default].weight
  static const std::regex kKey(R"(^(?:base_model\.model\.)?(.*\blayers\.(\d+)\.(.+))\.lora_([AB])(?:\.[A-Za-z0-9_]+)?\.weight$)");
  std::map<std::pair<int, std::string>, Pair> pairs;
  std::map<std::pair<int, std::string>, std::string> full_names;
  for (const auto& [name, entry] : file.entries()) {
    if (name.find("lora_embedding") != std::string::npos || name.find("embed_tokens") != std::string::npos)
      throw Error(weights.string() + ": tensor '" + name + "': LoRA on the embeddings is not supported");
    std::smatch m;
    if (!std::regex_match(name, m, kKey)) {
      if (name.find("lm_head") != std::string::npos)
        throw Error(weights.string() + ": tensor '" + name + "': LoRA on lm_head is not supported");
      throw Error(weights.string() + ": tensor '" + name + "' is not a lora_A / lora_B weight of a model layer");
    }
    const auto key = std::make_pair(std::stoi(m[2].str()), m[3].str());
    (m[4] == "A" ? pairs[key].a : pairs[key].b) = name;
    full_names[key] = m[1].str();
  }
  if (pairs.empty()) throw Error(weights.string() + ": holds no LoRA weights");

  LoraAdapter out;
  out.path = dir;
  for (const auto& [key, pair] : pairs) {
    if (pair.a.empty() || pair.b.empty())
      throw Error(weights.string() + ": layer " + std::to_string(key.first) + " " + key.second + " has lora_" +
                  (pair.a.empty() ? "B without lora_A" : "A without lora_B"));
    const Tensor a = file.tensor(pair.a), b = file.tensor(pair.b);
    if (a.ndim() != 2 || b.ndim() != 2 || a.dim(0) != b.dim(1) || a.dim(0) <= 0)
      throw Error(weights.string() + ": " + pair.a + " " + a.shape_str() + " and " + pair.b + " " + b.shape_str() +
                  " are not [r, in] and [out, r]");
    LoraModule mod;
    mod.layer = key.first;
    mod.module = key.second;
    mod.rank = static_cast<int>(a.dim(0));
    mod.in_features = a.dim(1);
    mod.out_features = b.dim(0);
    if (max_rank > 0 && mod.rank > max_rank)
      throw Error("LoRA adapter " + dir + ": " + pair.a + " has rank " + std::to_string(mod.rank) +
                  ", above --max-lora-rank " + std::to_string(max_rank));
    const double mod_alpha = pattern_value(alpha_pattern, full_names[key], src).value_or(alpha);
    mod.scale = static_cast<float>(rslora ? mod_alpha / std::sqrt(static_cast<double>(mod.rank)) : mod_alpha / mod.rank);
    mod.a.resize(static_cast<size_t>(a.numel()));
    mod.b.resize(static_cast<size_t>(b.numel()));
    convert_to_f32(a.data, a.dtype, mod.a.data(), mod.a.size());
    convert_to_f32(b.data, b.dtype, mod.b.data(), mod.b.size());
    out.max_rank = std::max(out.max_rank, mod.rank);
    out.modules.push_back(std::move(mod));
  }
  return out;
}

}  // namespace vireo
