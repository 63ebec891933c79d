#include "cli/lora_flags.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace vireo {

void add_lora_flags(CLI::App& app, EngineConfig& c, LoraFlags& f) {
  app.add_flag("--enable-lora", c.enable_lora, "Serve LoRA adapters beside the base model");
  app.add_option("--lora-modules", f.modules,
                 "LoRA adapters: name=path or '{\"name\": ..., \"path\": ...}' (PEFT folders with adapter_config.json "
                 "and adapter_model.safetensors); requests pick one with \"model\": name")
      ->expected(1, -1);
  app.add_option("--max-loras", c.max_loras, "Most distinct adapters in one batch")->capture_default_str();
  app.add_option("--max-lora-rank", c.max_lora_rank, "Adapters of a larger rank are refused")->capture_default_str();
  app.add_option("--max-cpu-loras", f.max_cpu_loras, "Accepted for vLLM command lines: every adapter stays loaded");
}

EngineConfig::LoraModuleSpec parse_lora_module(const std::string& text) {
  EngineConfig::LoraModuleSpec spec;
  if (!text.empty() && text.front() == '{') {
    const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("name") || !j.contains("path") || !j["name"].is_string() || !j["path"].is_string())
      throw Error("--lora-modules: expected {\"name\": ..., \"path\": ...}, got " + text);
    spec.name = j["name"].get<std::string>();
    spec.path = j["path"].get<std::string>();
  } else {
    const size_t eq = text.find('=');
    if (eq == std::string::npos) throw Error("--lora-modules: expected name=path, got '" + text + "'");
    spec.name = text.substr(0, eq);
    spec.path = text.substr(eq + 1);
  }
  if (spec.name.empty() || spec.path.empty()) throw Error("--lora-modules: empty name or path in '" + text + "'");
  return spec;
}

void apply_lora_flags(const LoraFlags& f, EngineConfig& c) {
  if (f.max_cpu_loras < 0) throw Error("--max-cpu-loras must be >= 0");
  for (const auto& m : f.modules) c.lora_modules.push_back(parse_lora_module(m));
}

}  // namespace vireo
