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
  // Host view of a tensor (F32/F16/BF16, or U8 for packed data and the raw bytes of F8_E4M3 / F8_E5M2;
  // other dtypes throw naming file and tensor).
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
  // FP8 tensors have no view and cannot be read without their scales (with_fp8_dequant reads them).
  std::optional<Tensor> view(const std::string& name, const std::vector<int64_t>& expected) const override {
    if (is_fp8(name)) return std::nullopt;
    return get(name, expected);
  }
  void read(const std::string& name, const std::vector<int64_t>& expected, DType dtype, void* dst) const override;
  std::optional<std::vector<int64_t>> shape(const std::string& name) const override {
    auto it = where_.find(name);
    if (it == where_.end()) return std::nullopt;
    return it->second->entries().at(name).shape;
  }
  // The tensor, checked against the expected shape; errors name the file and the tensor.
  Tensor get(const std::string& name, const std::vector<int64_t>& expected_shape) const;
  const std::string& dir() const { return dir_; }
  // The safetensors dtype `name` is stored in ("BF16", "F8_E4M3", ...); "" where absent.
  std::string stored_dtype(const std::string& name) const;
  bool is_fp8(const std::string& name) const { return stored_dtype(name).rfind("F8_", 0) == 0; }
  bool has_fp8() const;  // any tensor stored in F8_E4M3 / F8_E5M2

 private:
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsFile*> where_;
};

}  // namespace vireo
