// Writing and reading whole safetensors files in tests (crafted checkpoints, renamed tensors).
#pragma once
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/safetensors.h"

namespace vireo::testing {

struct RawTensor {
  std::string dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

inline void write_safetensors(const std::filesystem::path& path, const std::map<std::string, RawTensor>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  std::string data;
  for (const auto& [name, t] : tensors) {
    header[name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data += t.bytes;
  }
  std::string h = header.dump();
  uint64_t n = h.size();
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(&n), 8);
  f << h << data;
}

inline std::map<std::string, RawTensor> read_safetensors(const std::filesystem::path& path) {
  SafetensorsFile f(path.string());
  std::map<std::string, RawTensor> out;
  for (const auto& [name, e] : f.entries()) {
    Tensor t = f.tensor(name);
    out[name] = {e.dtype, e.shape, std::string(static_cast<const char*>(t.data), t.nbytes())};
  }
  return out;
}

}  // namespace vireo::testing
