// AsyncEngine over an EngineCore: a background thread runs steps while callers add and abort
// requests from any thread. Constructed from already loaded parts (create() loads them; tests
// pass fakes).
#pragma once
#include <atomic>
#include <functional>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "engine/async_engine.h"
#include "engine/engine_core.h"
#include "engine/lora_registry.h"
#include "engine/request_stream.h"
#include "model/model_config.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace vireo {

struct EngineParts {
  EngineConfig config;
  std::unique_ptr<Tokenizer> tokenizer;        // required
  std::unique_ptr<ChatTemplate> chat_template; // may be null
  std::unique_ptr<Model> model;                // required
  GenerationConfig generation_config;
  int max_model_len = 0;
  int num_kv_blocks = 0;                       // including the null block
  std::vector<int32_t> eos_token_ids;
  std::vector<AsyncEngine::LoraInfo> loras;    // adapters already added to the model (--lora-modules)
  SpeculativeConfig speculative;               // config.speculative_config, parsed once
};

// Checks a request against the engine's limits; throws vireo::Error with a user-facing message.
void validate_request(const std::vector<int32_t>& prompt, const SamplingParams& p, int vocab_size, int max_model_len);

class AsyncEngineImpl : public AsyncEngine {
 public:
  explicit AsyncEngineImpl(EngineParts parts);
  ~AsyncEngineImpl() override;

  std::shared_ptr<RequestStream> add_request(const std::string& request_id, std::vector<int32_t> prompt_token_ids,
                                             const SamplingParams& params) override;
  void abort(const std::string& request_id) override;
  const Tokenizer& tokenizer() const override { return *tokenizer_; }
  const ChatTemplate* chat_template() const override { return chat_template_.get(); }
  const ModelConfig& model_config() const override { return model_config_; }
  const GenerationConfig& generation_config() const override { return generation_config_; }
  const EngineConfig& config() const override { return config_; }
  int max_model_len() const override { return max_model_len_; }
  EngineStats stats() const override;
  void shutdown(std::chrono::milliseconds timeout) override;
  std::vector<LoraInfo> loras() const override { return loras_.list(); }
  int32_t lora_id(const std::string& name) const override { return loras_.find(name); }
  void load_lora(const std::string& name, const std::string& path) override;    // async_engine_lora.cc
  void unload_lora(const std::string& name) override;

 private:
  void loop();
  // Runs `task` on the loop thread between steps (the model is the loop's) and waits for it; rethrows.
  void run_on_loop(std::function<void(EngineCore&)> task);
  // Frees the unloaded adapters no request uses any more (loop thread).
  void drop_unused_loras();

  EngineConfig config_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ChatTemplate> chat_template_;
  ModelConfig model_config_;
  GenerationConfig generation_config_;
  int max_model_len_ = 0;
  std::unique_ptr<EngineCore> core_;  // touched only by the loop thread after construction

  mutable std::mutex mu_;
  std::condition_variable cv_;       // wakes the loop
  std::condition_variable idle_cv_;  // the loop went idle (shutdown waits on it)
  std::vector<std::shared_ptr<Request>> new_requests_;
  std::vector<std::string> aborts_;
  std::unordered_map<std::string, std::shared_ptr<QueueRequestStream>> streams_;
  bool accepting_ = true;
  bool stop_ = false;
  bool core_busy_ = false;  // the core holds unfinished requests
  std::vector<std::function<void()>> loop_tasks_;  // run_on_loop's, in order

  LoraRegistry loras_;
  std::vector<int32_t> unloaded_loras_;  // removed from loras_, still on the model (loop thread only)

  mutable std::mutex stats_mu_;
  EngineStats stats_;
  std::thread thread_;
};

}  // namespace vireo
