#include "engine/async_engine_impl.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"

namespace vireo {

void validate_request(const std::vector<int32_t>& prompt, const SamplingParams& p, int vocab_size, int max_model_len) {
  if (prompt.empty()) throw Error("the prompt must not be empty");
  for (int32_t id : prompt)
    if (id < 0 || id >= vocab_size)
      throw Error(fmt::format("prompt token id {} is out of vocabulary (vocab size {})", id, vocab_size));
  if (p.max_tokens < 1) throw Error(fmt::format("max_tokens must be at least 1, got {}", p.max_tokens));
  const long total = static_cast<long>(prompt.size()) + p.max_tokens;
  if (total > max_model_len)
    throw Error(fmt::format(
        "This model's maximum context length is {} tokens. However, you requested {} tokens ({} in the messages, "
        "{} in the completion). Please reduce the length of the messages or completion.",
        max_model_len, total, prompt.size(), p.max_tokens));
  if (p.temperature < 0.0f) throw Error(fmt::format("temperature must be non-negative, got {}", p.temperature));
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) throw Error(fmt::format("top_p must be in (0, 1], got {}", p.top_p));
  if (p.top_k < -1) throw Error(fmt::format("top_k must be -1 (disable), or at least 1, got {}", p.top_k));
  if (p.min_p < 0.0f || p.min_p > 1.0f) throw Error(fmt::format("min_p must be in [0, 1], got {}", p.min_p));
  if (!(p.repetition_penalty > 0.0f))
    throw Error(fmt::format("repetition_penalty must be greater than zero, got {}", p.repetition_penalty));
  if (p.presence_penalty < -2.0f || p.presence_penalty > 2.0f)
    throw Error(fmt::format("presence_penalty must be in [-2, 2], got {}", p.presence_penalty));
  if (p.frequency_penalty < -2.0f || p.frequency_penalty > 2.0f)
    throw Error(fmt::format("frequency_penalty must be in [-2, 2], got {}", p.frequency_penalty));
  if (p.min_tokens < 0 || p.min_tokens > p.max_tokens)
    throw Error(fmt::format("min_tokens must be in [0, max_tokens={}], got {}", p.max_tokens, p.min_tokens));
  constexpr int kMaxLogprobs = 20;  // vLLM's default max_logprobs
  if (p.logprobs && (*p.logprobs < 0 || *p.logprobs > kMaxLogprobs))
    throw Error(fmt::format("logprobs must be in [0, {}], got {}", kMaxLogprobs, *p.logprobs));
  if (p.prompt_logprobs && (*p.prompt_logprobs < 0 || *p.prompt_logprobs > kMaxLogprobs))
    throw Error(fmt::format("prompt_logprobs must be in [0, {}], got {}", kMaxLogprobs, *p.prompt_logprobs));
}

AsyncEngineImpl::AsyncEngineImpl(EngineParts parts)
    : config_(parts.config),
      tokenizer_(std::move(parts.tokenizer)),
      chat_template_(std::move(parts.chat_template)),
      generation_config_(parts.generation_config),
      max_model_len_(parts.max_model_len) {
  if (!tokenizer_ || !parts.model) throw Error("AsyncEngine: tokenizer and model are required");
  model_config_ = parts.model->config();
  EngineCoreConfig cc;
  cc.seed = config_.seed;
  cc.async_scheduling = config_.async_scheduling > 0;
  cc.scheduler.max_num_seqs = config_.max_num_seqs;
  cc.scheduler.max_num_batched_tokens = config_.max_num_batched_tokens;
  cc.scheduler.max_model_len = max_model_len_;
  cc.scheduler.block_size = config_.block_size;
  cc.scheduler.num_blocks = parts.num_kv_blocks;
  cc.scheduler.enable_prefix_caching = config_.enable_prefix_caching;
  cc.scheduler.eos_token_ids = parts.eos_token_ids;
  cc.scheduler.policy = parse_scheduling_policy(config_.scheduling_policy);
  cc.scheduler.max_loras = config_.enable_lora ? config_.max_loras : 0;
  cc.pooling = config_.pooling;
  cc.speculative = parts.speculative;  // EngineCore refuses models with recurrent state
  if (cc.speculative.enabled()) cc.async_scheduling = false;
  if (cc.pooling.enabled) {
    cc.async_scheduling = false;
    // MEAN and CLS pool rows a cached prefix would skip; LAST's row always runs.
    if (cc.pooling.type != PoolingSpec::Type::kLast) cc.scheduler.enable_prefix_caching = false;
  }
  for (const LoraInfo& l : parts.loras) {
    if (loras_.reserve(l.name, l.path) != l.id) throw Error("AsyncEngine: LoRA ids must be 1, 2, ... in order");
    loras_.commit(l.id);
  }
  core_ = std::make_unique<EngineCore>(std::move(parts.model), tokenizer_.get(), cc);
  core_->fill_stats(stats_);
  thread_ = std::thread([this] { loop(); });
}

AsyncEngineImpl::~AsyncEngineImpl() { shutdown(std::chrono::milliseconds(0)); }

std::shared_ptr<RequestStream> AsyncEngineImpl::add_request(const std::string& request_id,
                                                            std::vector<int32_t> prompt_token_ids,
                                                            const SamplingParams& params) {
  validate_request(prompt_token_ids, params, model_config_.vocab_size, max_model_len_);
  // vLLM's check and message (clients match it to retry without the field).
  if (params.priority != 0 && config_.scheduling_policy != "priority")
    throw Error(fmt::format("Got priority {} but Priority scheduling is not enabled.", params.priority));
  auto req = std::make_shared<Request>(request_id, std::move(prompt_token_ids), params, monotonic_seconds());
  if (req->params.top_k < 0) req->params.top_k = 0;
  auto stream = std::make_shared<QueueRequestStream>();
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!accepting_) throw Error("the engine is shutting down");
    if (streams_.count(request_id)) throw Error("request id '" + request_id + "' is already in use");
    if (params.lora_id != 0 && !loras_.has_id(params.lora_id))  // under mu_: see unload_lora
      throw Error(fmt::format("no LoRA adapter with id {} is loaded", params.lora_id));
    streams_[request_id] = stream;
    new_requests_.push_back(std::move(req));
  }
  cv_.notify_all();
  return stream;
}

void AsyncEngineImpl::abort(const std::string& request_id) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!streams_.count(request_id)) return;
    aborts_.push_back(request_id);
  }
  cv_.notify_all();
}

EngineStats AsyncEngineImpl::stats() const {
  EngineStats s;
  {
    std::lock_guard<std::mutex> lk(stats_mu_);
    s = stats_;
  }
  const auto loras = loras_.list();
  auto names = [&](const std::vector<int32_t>& ids) {
    std::vector<std::string> out;
    for (int32_t id : ids)
      for (const auto& l : loras)
        if (l.id == id) out.push_back(l.name);
    return out;
  };
  s.running_loras = names(s.running_lora_ids);
  s.waiting_loras = names(s.waiting_lora_ids);
  std::lock_guard<std::mutex> lk(mu_);
  s.num_requests_waiting += static_cast<int>(new_requests_.size());
  return s;
}

void AsyncEngineImpl::loop() {
  while (true) {
    std::vector<std::shared_ptr<Request>> adds;
    std::vector<std::string> aborts;
    std::vector<std::function<void()>> tasks;
    {
      std::unique_lock<std::mutex> lk(mu_);
      core_busy_ = core_->has_unfinished();
      if (!core_busy_ && new_requests_.empty() && aborts_.empty()) idle_cv_.notify_all();
      cv_.wait(lk, [&] {
        return stop_ || core_busy_ || !new_requests_.empty() || !aborts_.empty() || !loop_tasks_.empty();
      });
      if (stop_ && !core_busy_ && new_requests_.empty() && aborts_.empty() && loop_tasks_.empty()) break;
      adds.swap(new_requests_);
      aborts.swap(aborts_);
      tasks.swap(loop_tasks_);
    }
    for (auto& t : tasks) t();  // each reports its own outcome to its caller
    if (adds.empty() && aborts.empty() && !core_->has_unfinished()) {
      drop_unused_loras();
      continue;
    }
    std::vector<RequestOutput> outputs;
    try {
      for (auto& r : adds) core_->add_request(std::move(r));
      for (auto& id : aborts) core_->abort_request(id);
      outputs = core_->step();
    } catch (const std::exception& e) {
      log_error("engine step failed: {}; failing all requests", e.what());
      outputs = core_->fail_all(e.what());
    }
    drop_unused_loras();
    {
      std::lock_guard<std::mutex> lk(stats_mu_);
      core_->fill_stats(stats_);
    }
    std::lock_guard<std::mutex> lk(mu_);
    for (auto& out : outputs) {
      auto it = streams_.find(out.request_id);
      if (it == streams_.end()) continue;
      bool fin = out.finished;
      it->second->push(std::move(out));
      if (fin) streams_.erase(it);
    }
  }
}

void AsyncEngineImpl::shutdown(std::chrono::milliseconds timeout) {
  {
    std::unique_lock<std::mutex> lk(mu_);
    if (!thread_.joinable()) return;
    accepting_ = false;
    idle_cv_.wait_for(lk, timeout, [&] { return !core_busy_ && new_requests_.empty() && streams_.empty(); });
    for (auto& [id, s] : streams_) aborts_.push_back(id);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

}  // namespace vireo
