// The LoRA adapters an engine serves: name -> (id, path), safe to read from any thread. Ids are never
// reused, so a prefix-cache block made under an unloaded adapter can never match a later one
// (KvCacheManager seeds the block hashes with the id).
#pragma once
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "engine/async_engine.h"

namespace vireo {

class LoraRegistry {
 public:
  using Info = AsyncEngine::LoraInfo;
  // Reserves the next id for `name` (throws Error if the name is taken); commit() makes it visible.
  int32_t reserve(const std::string& name, const std::string& path);
  void commit(int32_t id);
  void release(int32_t id);  // a reservation whose load failed
  // Removes `name` and returns its id (throws Error for an unknown name).
  int32_t remove(const std::string& name);
  int32_t find(const std::string& name) const;  // 0: none
  bool has_id(int32_t id) const;
  std::vector<Info> list() const;  // committed adapters, in load order

 private:
  struct Entry {
    Info info;
    bool committed = false;
  };
  mutable std::mutex mu_;
  std::vector<Entry> entries_;
  int32_t next_id_ = 1;
};

}  // namespace vireo
