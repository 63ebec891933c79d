// A GGUF model as one file or as the shards llama.cpp's gguf-split writes
// (<prefix>-00001-of-0000N.gguf ...): metadata from the first file, tensors from all of them.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"

namespace vireo {

class GgufShards {
 public:
  // `path`: a single GGUF file or the first shard; the other shards are found by name next to it.
  // Throws vireo::Error naming the file at fault (a missing shard, a later shard given first, ...).
  explicit GgufShards(const std::string& path);

  const GgufFile& first() const { return *files_.front(); }  // the model's metadata
  size_t num_files() const { return files_.size(); }
  size_t num_tensors() const { return index_.size(); }

  struct Found {
    const GgufFile* file = nullptr;
    const GgufTensorInfo* info = nullptr;  // nullptr: no such tensor
    const uint8_t* data() const { return file->tensor_data(*info); }
  };
  Found find_tensor(const std::string& name) const;

 private:
  std::vector<std::unique_ptr<GgufFile>> files_;
  std::map<std::string, Found> index_;
};

}  // namespace vireo
