// The thread-safe front of the engine: callers add requests from any thread and pull their
// outputs from a stream; one background thread runs schedule -> forward -> sample steps.
#pragma once
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine_config.h"
#include "engine/engine_stats.h"
#include "engine/request_output.h"
#include "engine/sampling_params.h"

namespace vireo {

class Tokenizer;
class ChatTemplate;
struct ModelConfig;
struct GenerationConfig;

class RequestStream {
 public:
  virtual ~RequestStream() = default;
  // Waits up to `timeout` for the next output; nullopt on timeout or once the finished output
  // has been taken.
  virtual std::optional<RequestOutput> next(std::chrono::milliseconds timeout) = 0;
};

class AsyncEngine {
 public:
  virtual ~AsyncEngine() = default;
  // Loads tokenizer and model (may take a while) and starts the step loop.
  static std::unique_ptr<AsyncEngine> create(const EngineConfig& config);

  // Validates (throws vireo::Error with a user-facing message on a prompt too long for
  // max_model_len, out-of-vocabulary ids, ...) and enqueues. request_id must be unique.
  virtual std::shared_ptr<RequestStream> add_request(const std::string& request_id,
                                                     std::vector<int32_t> prompt_token_ids,
                                                     const SamplingParams& params) = 0;
  // Aborts at the next step boundary; the stream then gets finish_reason "abort". Unknown ids are ignored.
  virtual void abort(const std::string& request_id) = 0;

  virtual const Tokenizer& tokenizer() const = 0;
  virtual const ChatTemplate* chat_template() const = 0;  // null when the tokenizer has none
  virtual const ModelConfig& model_config() const = 0;
  virtual const GenerationConfig& generation_config() const = 0;
  virtual const EngineConfig& config() const = 0;
  virtual int max_model_len() const = 0;
  virtual EngineStats stats() const = 0;

  // LoRA adapters served under their own names (EngineConfig::enable_lora).
  struct LoraInfo {
    std::string name, path;
    int32_t id = 0;  // SamplingParams::lora_id
  };
  virtual std::vector<LoraInfo> loras() const { return {}; }
  // The adapter served as `name`; 0 when `name` is not an adapter.
  virtual int32_t lora_id(const std::string& name) const {
    (void)name;
    return 0;
  }
  // Loads the PEFT adapter at `path` under `name` / unloads it (requests already running with it finish
  // first); throw vireo::Error with a user-facing message (LoRA not enabled, name taken or unknown, a bad adapter).
  virtual void load_lora(const std::string& name, const std::string& path);
  virtual void unload_lora(const std::string& name);

  // Stops taking requests, lets running ones finish for up to timeout, aborts the rest.
  virtual void shutdown(std::chrono::milliseconds timeout) = 0;
};

}  // namespace vireo
