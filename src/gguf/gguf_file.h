// A read-only, mmapped GGUF file (versions 2 and 3): metadata key/values, tensor infos, and
// pointers to each tensor's bytes. Every count, length and offset is checked against the file
// size, so a truncated or corrupt file fails with a vireo::Error naming the file and the field.
#pragma once
#include "core/mapped_file.h"
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf/gguf_types.h"

namespace vireo {

// One metadata value. Scalars and strings are JSON scalars; arrays are JSON arrays (of arrays).
struct GgufValue {
  GgufType type = GgufType::kU8;
  GgufType array_type = GgufType::kU8;  // element type when type == kArray
  nlohmann::json value;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> ne;   // ggml order: ne[0] is the contiguous (row) dimension
  uint32_t type = 0;         // GgmlType id
  uint64_t offset = 0;       // from the start of the data section
  uint64_t nbytes = 0;
  int64_t numel() const;
  // Row-major shape as safetensors/HF write it: ne reversed ([out, in] for a linear weight).
  std::vector<int64_t> shape() const;
};

class GgufFile {
 public:
  explicit GgufFile(const std::string& path);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  // True when `path` is a regular file starting with the GGUF magic.
  static bool is_gguf(const std::string& path);

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  const GgufValue* find(const std::string& key) const;

  // Typed getters: nullopt when the key is absent; vireo::Error (naming file and key) when it has
  // another type. Integers of any width convert to int64 (u64 above INT64_MAX is an error);
  // get_float accepts integers too.
  std::optional<int64_t> get_int(const std::string& key) const;
  std::optional<double> get_float(const std::string& key) const;
  std::optional<bool> get_bool(const std::string& key) const;
  std::optional<std::string> get_string(const std::string& key) const;
  // An array of `elem` values (e.g. kString for tokenizer.ggml.tokens); nullptr when absent.
  const nlohmann::json* get_array(const std::string& key, GgufType elem) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(const std::string& name) const;
  const uint8_t* tensor_data(const GgufTensorInfo& t) const { return data_ + t.offset; }

 private:
  void parse();

  std::string path_;
  MappedFile file_;
  const void* map_ = nullptr;  // file_'s bytes
  size_t size_ = 0;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  const uint8_t* data_ = nullptr;  // start of the tensor data section
  std::map<std::string, GgufValue> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

}  // namespace vireo
