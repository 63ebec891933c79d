// vLLM's LoRA flags for `vireo serve`: --enable-lora, --lora-modules, --max-loras, --max-lora-rank
// (--max-cpu-loras accepted: adapters are all kept on the device here).
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "engine/engine_config.h"

namespace vireo {

struct LoraFlags {
  std::vector<std::string> modules;  // as given: name=path or {"name": ..., "path": ...}
  int max_cpu_loras = 0;
};

void add_lora_flags(CLI::App& app, EngineConfig& c, LoraFlags& f);
// Fills c.lora_modules from f.modules; throws vireo::Error on a malformed entry.
void apply_lora_flags(const LoraFlags& f, EngineConfig& c);
// One --lora-modules entry: "name=path", or vLLM's JSON form {"name": ..., "path": ..., "base_model_name": ...}.
EngineConfig::LoraModuleSpec parse_lora_module(const std::string& text);

}  // namespace vireo
