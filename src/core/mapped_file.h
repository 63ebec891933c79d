// A whole file mapped read-only (mmap), unmapped when the object goes: the weight files (safetensors,
// GGUF) are read in place through it.
#pragma once
#include <cstddef>
#include <string>

namespace vireo {

class MappedFile {
 public:
  MappedFile() = default;
  // Throws vireo::Error naming `path` when it cannot be opened, is not a regular file, is shorter than
  // min_bytes ("truncated <kind> file (N bytes)"), or cannot be mapped.
  MappedFile(const std::string& path, size_t min_bytes, const std::string& kind);
  ~MappedFile();
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const void* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace vireo
