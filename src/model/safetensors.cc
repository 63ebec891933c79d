#include "model/safetensors.h"


#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace vireo {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // safetensors caps headers at 100 MB

std::string shape_string(const std::vector<int64_t>& s) { return Tensor(nullptr, DType::kF32, s).shape_str(); }
}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path), file_(path, 8, "safetensors") {
  map_ = file_.data();
  size_ = file_.size();
  {
    uint64_t header_len = 0;
    std::memcpy(&header_len, map_, 8);  // little-endian u64
    if (header_len > kMaxHeaderBytes || header_len > size_ - 8)
      throw Error(path + ": bad safetensors header length " + std::to_string(header_len) + " (file has " +
                  std::to_string(size_) + " bytes)");
    const char* hdr = static_cast<const char*>(map_) + 8;
    data_ = hdr + header_len;
    const uint64_t data_size = size_ - 8 - header_len;
    json j;
    try {
      j = json::parse(hdr, hdr + header_len);
    } catch (const json::exception& e) {
      throw Error(path + ": malformed safetensors header JSON (" + e.what() + ")");
    }
    if (!j.is_object()) throw Error(path + ": safetensors header is not a JSON object");
    for (auto& [name, v] : j.items()) {
      if (name == "__metadata__") continue;
      SafetensorsEntry e;
      try {
        e.dtype = v.at("dtype").get<std::string>();
        e.shape = v.at("shape").get<std::vector<int64_t>>();
        auto off = v.at("data_offsets").get<std::vector<uint64_t>>();
        if (off.size() != 2) throw Error("");
        e.begin = off[0];
        e.end = off[1];
      } catch (const std::exception&) {
        throw Error(path + ": malformed header entry for tensor '" + name + "'");
      }
      if (e.end < e.begin || e.end > data_size)
        throw Error(path + ": tensor '" + name + "' data offsets [" + std::to_string(e.begin) + ", " +
                    std::to_string(e.end) + ") exceed the data section of " + std::to_string(data_size) +
                    " bytes (truncated file?)");
      entries_.emplace(name, std::move(e));
    }
  }
}

SafetensorsFile::~SafetensorsFile() = default;

Tensor SafetensorsFile::tensor(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) throw Error(path_ + ": no tensor '" + name + "'");
  const SafetensorsEntry& e = it->second;
  DType t;
  if (e.dtype == "F32") {
    t = DType::kF32;
  } else if (e.dtype == "F16") {
    t = DType::kF16;
  } else if (e.dtype == "BF16") {
    t = DType::kBF16;
  } else if (e.dtype == "U8" || e.dtype == "F8_E4M3" || e.dtype == "F8_E5M2") {
    t = DType::kU8;  // packed data (GPT-OSS's MXFP4 experts: *_blocks, *_scales), FP8 weights (fp8_weights.h)
  } else {
    throw Error(path_ + ": tensor '" + name + "' has dtype " + e.dtype +
                " (supported: F32, F16, BF16, U8, F8_E4M3, F8_E5M2)");
  }
  Tensor view(const_cast<char*>(data_ + e.begin), t, e.shape);
  for (auto d : e.shape)
    if (d < 0) throw Error(path_ + ": tensor '" + name + "' has a negative dimension");
  if (view.nbytes() != e.end - e.begin)
    throw Error(path_ + ": tensor '" + name + "' shape " + view.shape_str() + " " + e.dtype + " needs " +
                std::to_string(view.nbytes()) + " bytes, data_offsets give " + std::to_string(e.end - e.begin));
  return view;
}

Checkpoint::Checkpoint(const std::string& model_dir) : dir_(model_dir) {
  const fs::path dir(model_dir);
  const fs::path index = dir / "model.safetensors.index.json";
  std::vector<std::string> shards;
  if (fs::exists(index)) {
    std::ifstream f(index);
    json j;
    try {
      j = json::parse(f);
    } catch (const json::exception& e) {
      throw Error(index.string() + ": malformed JSON (" + e.what() + ")");
    }
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
      throw Error(index.string() + ": field 'weight_map' is missing");
    std::map<std::string, std::string> wm;
    for (auto& [name, file] : j["weight_map"].items()) {
      if (!file.is_string()) throw Error(index.string() + ": weight_map entry '" + name + "' is not a file name");
      wm[name] = file.get<std::string>();
      if (std::find(shards.begin(), shards.end(), wm[name]) == shards.end()) shards.push_back(wm[name]);
    }
    std::map<std::string, const SafetensorsFile*> by_file;
    for (const auto& s : shards) {
      if (!fs::exists(dir / s)) throw Error((dir / s).string() + ": shard listed in " + index.string() + " is missing");
      files_.push_back(std::make_unique<SafetensorsFile>((dir / s).string()));
      by_file[s] = files_.back().get();
    }
    for (auto& [name, file] : wm) {
      const SafetensorsFile* sf = by_file[file];
      if (!sf->entries().count(name))
        throw Error(sf->path() + ": tensor '" + name + "' listed in the index is not in the shard");
      where_[name] = sf;
    }
    return;
  }
  if (!fs::is_directory(dir)) throw Error(model_dir + ": model directory does not exist");
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".safetensors") shards.push_back(e.path().string());
  std::sort(shards.begin(), shards.end());
  if (shards.empty()) throw Error(model_dir + ": no *.safetensors files (use --load-format dummy for random weights)");
  for (const auto& s : shards) {
    files_.push_back(std::make_unique<SafetensorsFile>(s));
    for (const auto& [name, _] : files_.back()->entries()) where_.emplace(name, files_.back().get());
  }
}

Tensor Checkpoint::get(const std::string& name, const std::vector<int64_t>& expected) const {
  auto it = where_.find(name);
  if (it == where_.end()) {
    std::string files;
    for (const auto& f : files_) files += (files.empty() ? "" : ", ") + fs::path(f->path()).filename().string();
    throw Error(dir_ + ": missing tensor '" + name + "' (looked in " + files + ")");
  }
  Tensor t = it->second->tensor(name);
  if (t.shape != expected)
    throw Error(it->second->path() + ": tensor '" + name + "' has shape " + t.shape_str() + ", expected " +
                shape_string(expected));
  return t;
}

void Checkpoint::read(const std::string& name, const std::vector<int64_t>& expected, DType dtype, void* dst) const {
  if (is_fp8(name))
    throw Error(dir_ + ": tensor '" + name + "' is stored in " + stored_dtype(name) + " and needs its scales");
  store_as(get(name, expected), dtype, dst);
}

std::string Checkpoint::stored_dtype(const std::string& name) const {
  auto it = where_.find(name);
  return it == where_.end() ? std::string() : it->second->entries().at(name).dtype;
}

bool Checkpoint::has_fp8() const {
  for (const auto& [name, file] : where_)
    if (file->entries().at(name).dtype.rfind("F8_", 0) == 0) return true;
  return false;
}

}  // namespace vireo
