// LoRA adapters at run time (vLLM's /v1/load_lora_adapter and /v1/unload_lora_adapter): the adapter is
// read on the caller's thread, put on the device by the loop thread between steps (the model belongs to
// it), and freed once no request uses it.
#include <future>

#include "core/error.h"
#include "core/log.h"
#include "engine/async_engine_impl.h"
#include "model/lora_adapter.h"

namespace vireo {

void AsyncEngine::load_lora(const std::string&, const std::string&) {
  throw Error("LoRA is not enabled: start the server with --enable-lora");
}

void AsyncEngine::unload_lora(const std::string&) {
  throw Error("LoRA is not enabled: start the server with --enable-lora");
}

void AsyncEngineImpl::run_on_loop(std::function<void(EngineCore&)> task) {
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> result = done->get_future();
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!accepting_) throw Error("the engine is shutting down");
    loop_tasks_.push_back([this, task = std::move(task), done] {
      try {
        task(*core_);
        done->set_value();
      } catch (...) {
        done->set_exception(std::current_exception());
      }
    });
  }
  cv_.notify_all();
  result.get();
}

void AsyncEngineImpl::load_lora(const std::string& name, const std::string& path) {
  if (!config_.enable_lora) AsyncEngine::load_lora(name, path);
  if (name.empty()) throw Error("lora_name must not be empty");
  const int32_t id = loras_.reserve(name, path);
  try {
    auto adapter = std::make_shared<LoraAdapter>(load_lora_adapter(path, config_.max_lora_rank));
    run_on_loop([id, adapter](EngineCore& core) { core.runner().model().add_lora(id, *adapter); });
  } catch (...) {
    loras_.release(id);
    throw;
  }
  loras_.commit(id);
  log_info("LoRA adapter '{}' loaded from {}", name, path);
}

void AsyncEngineImpl::unload_lora(const std::string& name) {
  if (!config_.enable_lora) AsyncEngine::unload_lora(name);
  {
    // Under mu_, as add_request's check of the id: a request that passed it is in new_requests_ before
    // this task, so the loop adds it to the core before drop_unused_loras can free the adapter.
    std::lock_guard<std::mutex> lk(mu_);
    const int32_t id = loras_.remove(name);  // new requests can no longer name it
    loop_tasks_.push_back([this, id] { unloaded_loras_.push_back(id); });
  }
  cv_.notify_all();
  log_info("LoRA adapter '{}' unloaded", name);
}

void AsyncEngineImpl::drop_unused_loras() {
  std::erase_if(unloaded_loras_, [&](int32_t id) {
    if (core_->scheduler().uses_lora(id)) return false;
    core_->runner().model().remove_lora(id);
    return true;
  });
}

}  // namespace vireo
