#include "engine/lora_registry.h"

#include <algorithm>

#include "core/error.h"

namespace vireo {

int32_t LoraRegistry::reserve(const std::string& name, const std::string& path) {
  std::lock_guard<std::mutex> lk(mu_);
  if (std::any_of(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.info.name == name; }))
    throw Error("The lora adapter '" + name + "' has already been loaded.");
  entries_.push_back({{name, path, next_id_}, false});
  return next_id_++;
}

void LoraRegistry::commit(int32_t id) {
  std::lock_guard<std::mutex> lk(mu_);
  for (Entry& e : entries_)
    if (e.info.id == id) e.committed = true;
}

void LoraRegistry::release(int32_t id) {
  std::lock_guard<std::mutex> lk(mu_);
  std::erase_if(entries_, [&](const Entry& e) { return e.info.id == id; });
}

int32_t LoraRegistry::remove(const std::string& name) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.committed && e.info.name == name; });
  if (it == entries_.end()) throw Error("The lora adapter '" + name + "' cannot be found.");
  const int32_t id = it->info.id;
  entries_.erase(it);
  return id;
}

int32_t LoraRegistry::find(const std::string& name) const {
  std::lock_guard<std::mutex> lk(mu_);
  for (const Entry& e : entries_)
    if (e.committed && e.info.name == name) return e.info.id;
  return 0;
}

bool LoraRegistry::has_id(int32_t id) const {
  std::lock_guard<std::mutex> lk(mu_);
  return std::any_of(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.committed && e.info.id == id; });
}

std::vector<LoraRegistry::Info> LoraRegistry::list() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<Info> out;
  for (const Entry& e : entries_)
    if (e.committed) out.push_back(e.info);
  return out;
}

}  // namespace vireo
