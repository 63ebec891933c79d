#include "server/server_context.h"

#include <fmt/format.h>

#include <random>

#include "model/model_config.h"
#include "tokenizer/tokenizer.h"

namespace vireo::server {

void ServerContext::set_engine(std::shared_ptr<AsyncEngine> engine) {
  ModelInfo info;
  const EngineConfig& cfg = engine->config();
  info.served_model_name = options_.served_model_name;
  if (info.served_model_name.empty()) info.served_model_name = cfg.served_model_name;
  if (info.served_model_name.empty()) info.served_model_name = cfg.model;
  if (info.served_model_name.empty()) info.served_model_name = "default";
  for (const auto& alias : options_.served_model_aliases)
    if (alias != info.served_model_name) info.served_model_aliases.push_back(alias);
  info.max_model_len = engine->max_model_len();
  info.priority_scheduling = cfg.scheduling_policy == "priority";
  info.pooling = cfg.pooling.enabled;
  info.labels = cfg.pooling.labels;
  info.vocab_size = engine->tokenizer().vocab_size();
  const GenerationConfig& gen = engine->generation_config();
  info.temperature = gen.temperature;
  info.top_p = gen.top_p;
  info.top_k = gen.top_k;
  info.min_p = gen.min_p;
  info.repetition_penalty = gen.repetition_penalty;
  if (!options_.reasoning_parser.empty()) info.reasoning_end_token = engine->tokenizer().token_to_id("</think>");
  info.chat_keeps_special_tokens = options_.reasoning_parser == "openai_gptoss";
  std::lock_guard<std::mutex> lock(mu_);
  engine_ = std::move(engine);
  model_info_ = std::move(info);
}

std::shared_ptr<AsyncEngine> ServerContext::engine() const {
  std::lock_guard<std::mutex> lock(mu_);
  return engine_;
}

void ServerContext::set_load_error(std::string message) {
  std::lock_guard<std::mutex> lock(mu_);
  load_error_ = std::move(message);
}

std::optional<std::string> ServerContext::load_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return load_error_;
}

ModelInfo ServerContext::model_info() const {
  std::lock_guard<std::mutex> lock(mu_);
  ModelInfo info = model_info_;
  if (engine_)  // adapters come and go at run time (/v1/load_lora_adapter)
    for (const auto& l : engine_->loras()) info.loras.push_back({l.name, l.path, l.id});
  return info;
}

std::string ServerContext::new_id(const char* prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  uint64_t counter;
  {
    std::lock_guard<std::mutex> lock(mu_);
    counter = ++id_counter_;
  }
  // Random high bits + a process counter: unique within the process even if the rng repeats.
  return fmt::format("{}-{:016x}{:016x}", prefix, rng(), counter);
}

void ServerContext::register_request(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  in_flight_.insert(id);
}

void ServerContext::unregister_request(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  in_flight_.erase(id);
  if (in_flight_.empty()) drained_cv_.notify_all();
}

size_t ServerContext::num_in_flight() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_flight_.size();
}

bool ServerContext::wait_drained(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  return drained_cv_.wait_until(lock, deadline, [&] { return in_flight_.empty(); });
}

void ServerContext::abort_all_in_flight() {
  std::set<std::string> ids;
  std::shared_ptr<AsyncEngine> engine;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ids = in_flight_;
    engine = engine_;
  }
  if (!engine) return;
  for (const auto& id : ids) engine->abort(id);
}

void ServerContext::count_finish(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  ++finish_counts_[reason];
}

FinishCounts ServerContext::finish_counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return finish_counts_;
}

}  // namespace vireo::server
