// Read-only, mmapped safetensors checkpoints: one file, or shards listed by
// model.safetensors.index.json. Tensors come back as host views into the mapping.
#pragma once
#include "core/mapped_file.h"
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/weight_source.h"

namespace vireo {

struct SafetensorsEntry {
  std::string dtype;  // safetensors spelling ("BF16", "I64", ...)
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte offsets into the data section
};

class SafetensorsFile {
 public:
  // Maps the file and validates the header (length, JSON, offsets within the file).
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::map<std::string, SafetensorsEntry>& entries() const { return entries_; }
  // Host view of a tensor (F32/F16/BF16, or U8 for packed data; other dtypes throw naming file and tensor).
  Tensor tensor(const std::string& name) const;

 private:
  std::string path_;
  MappedFile file_;
  const void* map_ = nullptr;  // file_'s bytes
  size_t size_ = 0;
  const char* data_ = nullptr;  // start of the data section
  std::map<std::string, SafetensorsEntry> entries_;
};

// All tensors of a model directory.
class Checkpoint final : public WeightSource {
 public:
  explicit Checkpoint(const std::string& model_dir);
  bool has(const std::string& name) const override { return where_.count(name) > 0; }
  std::optional<Tensor> view(const std::string& name, const std::vector<int64_t>& expected) const override {
    return get(name, expected);
  }
  void read(const std::string& name, const std::vector<int64_t>& expected, DType dtype, void* dst) const override {
    store_as(get(name, expected), dtype, dst);
  }
  std::optional<std::vector<int64_t>> shape(const std::string& name) const override {
    auto it = where_.find(name);
    if (it == where_.end()) return std::nullopt;
    return it->second->entries().at(name).shape;
  }
  // The tensor, checked against the expected shape; errors name the file and the tensor.
  Tensor get(const std::string& name, const std::vector<int64_t>& expected_shape) const;
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsFile*> where_;
};

}  // namespace vireo
