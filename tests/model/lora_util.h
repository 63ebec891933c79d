// Test helpers for LoRA: a PEFT adapter of random matrices over a fixture checkpoint, and the fixture
// with that adapter merged by hand (W + scale * B @ A, what PEFT's merge_and_unload writes).
#pragma once
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "safetensors_util.h"

namespace vireo::testing {

inline std::vector<float> floats_of(const RawTensor& t) {
  std::vector<float> v(t.bytes.size() / 4);
  std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
  return v;
}

inline RawTensor raw_of(const std::vector<float>& v, std::vector<int64_t> shape) {
  return {"F32", std::move(shape), std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4)};
}

struct AdapterModule {
  std::string module;  // inside the layer, e.g. "self_attn.q_proj"
  int rank;
  float alpha;  // differs from the adapter's lora_alpha: goes into alpha_pattern
};

// Writes a PEFT adapter over `modules` of every layer of the F32 checkpoint `fixture` (random A, B) into
// root/name, and the fixture with the adapter merged into root/name_merged; returns the adapter's folder.
inline std::filesystem::path write_lora_adapter(const std::filesystem::path& fixture, const std::filesystem::path& root,
                                                const std::string& name, const std::vector<AdapterModule>& modules,
                                                uint32_t seed, bool rslora = false, float default_alpha = 16.0f) {
  namespace fs = std::filesystem;
  using nlohmann::json;
  const json cfg = json::parse(std::ifstream(fixture / "config.json"));
  const int L = cfg["num_hidden_layers"];
  auto base = read_safetensors(fixture / "model.safetensors");
  std::map<std::string, RawTensor> adapter;
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 0.3f);
  json alpha_pattern = json::object();
  for (const auto& m : modules)
    if (m.alpha != default_alpha) alpha_pattern[m.module] = m.alpha;
  for (int l = 0; l < L; ++l) {
    for (const auto& m : modules) {
      const std::string wname = "model.layers." + std::to_string(l) + "." + m.module + ".weight";
      if (!base.count(wname) || base[wname].dtype != "F32") throw std::runtime_error("no F32 tensor " + wname);
      RawTensor& w = base[wname];
      const int64_t out = w.shape[0], in = w.shape[1];
      std::vector<float> a(static_cast<size_t>(m.rank * in)), b(static_cast<size_t>(out * m.rank));
      for (float& x : a) x = nd(rng);
      for (float& x : b) x = nd(rng);
      const std::string key = "base_model.model.model.layers." + std::to_string(l) + "." + m.module;
      adapter[key + ".lora_A.weight"] = raw_of(a, {m.rank, in});
      adapter[key + ".lora_B.weight"] = raw_of(b, {out, m.rank});
      const double scale = rslora ? m.alpha / std::sqrt(static_cast<double>(m.rank)) : m.alpha / m.rank;
      std::vector<float> wv = floats_of(w);
      for (int64_t o = 0; o < out; ++o)
        for (int64_t i = 0; i < in; ++i) {
          double d = 0;
          for (int r = 0; r < m.rank; ++r) d += static_cast<double>(b[o * m.rank + r]) * a[r * in + i];
          wv[o * in + i] += static_cast<float>(scale * d);
        }
      w = raw_of(wv, w.shape);
    }
  }
  const fs::path dir = root / name, merged = root / (name + "_merged");
  fs::create_directories(dir);
  fs::create_directories(merged);
  write_safetensors(dir / "adapter_model.safetensors", adapter);
  json acfg = {{"peft_type", "LORA"}, {"r", modules.front().rank}, {"lora_alpha", default_alpha},
               {"use_rslora", rslora}, {"bias", "none"}, {"alpha_pattern", alpha_pattern},
               {"target_modules", json::array()}};
  std::ofstream(dir / "adapter_config.json") << acfg.dump();
  write_safetensors(merged / "model.safetensors", base);
  fs::copy_file(fixture / "config.json", merged / "config.json", fs::copy_options::overwrite_existing);
  return dir;
}

}  // namespace vireo::testing
