#include "gguf/gguf_shards.h"

#include <fmt/format.h>

#include <filesystem>
#include <regex>

#include "core/error.h"

namespace vireo {

GgufShards::GgufShards(const std::string& path) {
  files_.push_back(std::make_unique<GgufFile>(path));
  const GgufFile& f = *files_.front();
  const int64_t count = f.get_int("split.count").value_or(1);
  if (count > 1) {
    const int64_t no = f.get_int("split.no").value_or(0);
    // llama.cpp's split names: "%s-%05d-of-%05d.gguf" with 1-based shard numbers.
    static const std::regex kName(R"((.*)-(\d{5})-of-(\d{5})\.gguf)");
    std::smatch m;
    const std::string name = std::filesystem::path(path).filename().string();
    if (!std::regex_match(name, m, kName))
      throw Error(path + ": split.count is " + std::to_string(count) +
                  " but the file name does not end in -00001-of-NNNNN.gguf, so its other shards cannot be found");
    const std::filesystem::path dir = std::filesystem::path(path).parent_path();
    if (no != 0)
      throw Error(path + ": this is shard " + std::to_string(no + 1) + " of " + std::to_string(count) +
                  "; pass the first one, " + (dir / fmt::format("{}-00001-of-{:05d}.gguf", m[1].str(), count)).string());
    for (int64_t i = 1; i < count; ++i) {
      const std::string shard = (dir / fmt::format("{}-{:05d}-of-{:05d}.gguf", m[1].str(), i + 1, count)).string();
      if (!std::filesystem::exists(shard))
        throw Error(shard + ": shard " + std::to_string(i + 1) + " of " + std::to_string(count) + " of " + path +
                    " is missing");
      files_.push_back(std::make_unique<GgufFile>(shard));
      if (files_.back()->get_int("split.no").value_or(i) != i)
        throw Error(shard + ": split.no is " + std::to_string(*files_.back()->get_int("split.no")) + ", expected " +
                    std::to_string(i));
    }
  }
  for (const auto& file : files_)
    for (const auto& t : file->tensors())
      if (!index_.emplace(t.name, Found{file.get(), &t}).second)
        throw Error(file->path() + ": tensor '" + t.name + "' is also in another shard");
  if (auto total = f.get_int("split.tensors.count"); total && *total != static_cast<int64_t>(index_.size()))
    throw Error(path + ": split.tensors.count is " + std::to_string(*total) + " but the shards hold " +
                std::to_string(index_.size()) + " tensors");
}

GgufShards::Found GgufShards::find_tensor(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? Found{files_.front().get(), nullptr} : it->second;
}

}  // namespace vireo
