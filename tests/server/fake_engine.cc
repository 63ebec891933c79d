#include "fake_engine.h"

#include <utility>

#include <cmath>

#include "core/error.h"

namespace vireo::testing {

std::vector<int32_t> ByteTokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::vector<int32_t> ids;
  if (add_special_tokens) ids.push_back(kBos);
  for (unsigned char c : text) ids.push_back(c);
  return ids;
}

std::string ByteTokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::string s;
  for (int32_t id : ids) {
    if (id >= 0 && id < 256) s += static_cast<char>(id);
    else if (!skip_special_tokens && id < vocab_size()) s += id_to_token(id);
  }
  return s;
}

std::optional<int32_t> ByteTokenizer::token_to_id(std::string_view token) const {
  if (token == "<eos>") return kEos;
  if (token == "<bos>") return kBos;
  if (token.size() == 1) return static_cast<unsigned char>(token[0]);
  return std::nullopt;
}

std::string ByteTokenizer::id_to_token(int32_t id) const {
  if (id == kEos) return "<eos>";
  if (id == kBos) return "<bos>";
  if (id >= 0 && id < 256) return std::string(1, static_cast<char>(id));
  if (id < vocab_size()) return "<special" + std::to_string(id) + ">";
  return "";
}

namespace {

class QueueStream : public RequestStream {
 public:
  std::optional<RequestOutput> next(std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return !queue_.empty(); });
    if (queue_.empty()) return std::nullopt;
    RequestOutput out = std::move(queue_.front());
    queue_.pop_front();
    return out;
  }
  void push(RequestOutput out) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(out));
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<RequestOutput> queue_;
};

}  // namespace

struct FakeEngine::Job {
  std::string id;
  std::vector<int32_t> prompt;
  SamplingParams params;
  std::shared_ptr<QueueStream> stream = std::make_shared<QueueStream>();
  std::atomic<bool> aborted{false};
};

FakeEngine::FakeEngine(FakeEngineOptions opts) : opts_(opts) {
  config_.model = "fake-model";
  config_.served_model_name = "fake-model";
  config_.scheduling_policy = opts.scheduling_policy;
  config_.enable_lora = opts.enable_lora;
  config_.pooling.enabled = opts.pooling;
  config_.pooling.labels = opts.labels;
  config_.pooling.matryoshka = opts.matryoshka;
  config_.pooling.matryoshka_dims = opts.matryoshka_dims;
  config_.pooling.classifier.assign(opts.labels.size() * 8, 0.0f);
  model_config_.hidden_size = 8;
  model_config_.vocab_size = tok_.vocab_size();
  if (opts_.with_chat_template) {
    std::string source = opts_.chat_template;
    if (source.empty())
      source = "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}"
               "{% if add_generation_prompt %}<assistant>{% endif %}";
    chat_template_ = std::make_unique<ChatTemplate>(source, "<bos>", "<eos>");
  }
}

FakeEngine::~FakeEngine() { shutdown(std::chrono::milliseconds(0)); }

std::string FakeEngine::expected_text(const std::vector<int32_t>& prompt, int num_tokens, std::optional<uint64_t> seed) {
  std::string s;
  uint64_t base = static_cast<uint64_t>(prompt.back()) + seed.value_or(0);
  for (int k = 0; k < num_tokens; ++k) s += static_cast<char>('a' + (base + k) % 26);
  return s;
}

std::shared_ptr<RequestStream> FakeEngine::add_request(const std::string& request_id, std::vector<int32_t> prompt,
                                                       const SamplingParams& params) {
  if (prompt.empty()) throw Error("fake engine: empty prompt");
  for (int32_t id : prompt)
    if (id < 0 || id >= tok_.vocab_size()) throw Error("fake engine: token id out of vocabulary");
  if (static_cast<int>(prompt.size()) + params.max_tokens > opts_.max_model_len) throw Error("fake engine: too long");
  auto job = std::make_shared<Job>();
  job->id = request_id;
  job->prompt = std::move(prompt);
  job->params = params;
  std::lock_guard<std::mutex> lock(mu_);
  if (stopped_) throw Error("fake engine: shut down");
  if (jobs_.count(request_id)) throw Error("fake engine: duplicate request id " + request_id);
  jobs_[request_id] = job;
  last_params_ = params;
  ++num_added_;
  threads_.emplace_back([this, job] { run_job(job); });
  return job->stream;
}

void FakeEngine::run_job(std::shared_ptr<Job> job) {
  const SamplingParams& p = job->params;
  std::string prompt_text = tok_.decode(job->prompt, true);
  bool fail = prompt_text.find("FAIL") != std::string::npos;
  bool holdable = prompt_text.find("HOLD") != std::string::npos;
  const bool quiet = prompt_text.find("QUIET") != std::string::npos;
  std::string held;  // QUIET: text of the first tokens, released with the 4th
  std::string expected = expected_text(job->prompt, p.max_tokens, p.seed);
  bool scripted = false;
  for (const auto& [key, text] : opts_.scripts) {
    if (prompt_text.find(key) == std::string::npos || text.empty()) continue;
    expected = text;
    scripted = true;
    break;
  }
  std::string text;
  num_prompt_ += job->prompt.size();
  if (opts_.pooling && !fail) {
    RequestOutput out;
    out.request_id = job->id;
    out.num_prompt_tokens = static_cast<int>(job->prompt.size());
    double sum = 0;
    for (int32_t id : job->prompt) sum += id;
    std::vector<float> e = {static_cast<float>(job->prompt.size()), static_cast<float>(job->prompt.front()),
                            static_cast<float>(job->prompt.back()), static_cast<float>(sum), 1, 0, 0, 0};
    double n = 0;
    for (float v : e) n += static_cast<double>(v) * v;
    for (float& v : e) v = static_cast<float>(v / std::sqrt(n));
    out.embedding = e;
    if (!opts_.labels.empty()) {
      out.embedding.clear();
      for (size_t c = 0; c < opts_.labels.size(); ++c)
        out.embedding.push_back(0.1f * static_cast<float>(c + 1) * static_cast<float>(job->prompt.back() - 100));
    }
    out.finished = true;
    out.finish_reason = "stop";
    job->stream->push(std::move(out));
    return;
  }
  for (int k = 0; k < p.max_tokens; ++k) {
    std::this_thread::sleep_for(opts_.token_delay);
    while (holdable && k >= 10 && hold_ && !job->aborted) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    RequestOutput out;
    out.request_id = job->id;
    out.num_prompt_tokens = static_cast<int>(job->prompt.size());
    if (job->aborted) {
      out.finished = true;
      out.finish_reason = "abort";
      out.num_output_tokens = k;
      job->stream->push(std::move(out));
      ++num_aborted_;
      break;
    }
    if (k == 0 && p.prompt_logprobs) {
      out.prompt_logprobs.push_back(std::nullopt);
      for (size_t i = 1; i < job->prompt.size(); ++i)
        out.prompt_logprobs.push_back(TokenLogprob{job->prompt[i], -1.0f, {{job->prompt[i], -1.0f}}});
    }
    int32_t tok = static_cast<unsigned char>(expected[k]);
    out.token_ids = {tok};
    out.num_output_tokens = k + 1;
    ++num_generated_;
    if (p.logprobs) {
      TokenLogprob lp{tok, -0.25f, {}};
      for (int t = 0; t < *p.logprobs; ++t) lp.top.push_back({static_cast<int32_t>('A' + t), -0.5f - t});
      out.logprobs.push_back(lp);
    }
    bool stop_tok = false;
    for (int32_t s : p.stop_token_ids) stop_tok |= s == tok;
    if (stop_tok) {
      out.finished = true;
      out.finish_reason = "stop";
      out.stop_token_id = tok;
    } else {
      std::string piece(1, expected[k]);
      text += piece;
      out.text = piece;
      if (quiet && k < 3 && k + 1 < p.max_tokens) {
        held += piece;
        out.text.clear();
      } else if (!held.empty()) {
        out.text = std::exchange(held, std::string()) + piece;
      }
      for (const auto& s : p.stop) {
        if (text.size() >= s.size() && text.compare(text.size() - s.size(), s.size(), s) == 0) {
          out.text = p.include_stop_str_in_output ? piece : piece.substr(0, piece.size() >= s.size() ? piece.size() - s.size() : 0);
          out.finished = true;
          out.finish_reason = "stop";
          out.stop_string = s;
          break;
        }
      }
    }
    if (fail) {
      out.finished = true;
      out.finish_reason = "error";
      // "GRAMMAR_FAIL": as the engine reports a request whose grammar it could not match.
      out.error_from_request = prompt_text.find("GRAMMAR_FAIL") != std::string::npos;
      out.error = out.error_from_request
                      ? "structured output: the grammar needs too much work for one token mask (it is too ambiguous)"
                      : "fake engine: injected failure";
    }
    if (scripted && !out.finished && k + 1 == static_cast<int>(expected.size()) && k + 1 < p.max_tokens) {
      out.finished = true;
      out.finish_reason = "stop";  // the script's end stands for an EOS token
    }
    if (!out.finished && k + 1 == p.max_tokens) {
      out.finished = true;
      out.finish_reason = "length";
    }
    bool done = out.finished;
    if (done && (out.finish_reason == "stop" || out.finish_reason == "length")) ++num_success_;
    job->stream->push(std::move(out));
    if (done) break;
  }
  std::lock_guard<std::mutex> lock(mu_);
  jobs_.erase(job->id);
}

void FakeEngine::abort(const std::string& request_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(request_id);
  if (it != jobs_.end()) it->second->aborted = true;
}

int FakeEngine::num_running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(jobs_.size());
}

EngineStats FakeEngine::stats() const {
  EngineStats s;
  s.num_requests_running = num_running();
  s.kv_cache_usage = s.num_requests_running > 0 ? 0.5 : 0.0;
  if (opts_.enable_lora) s.max_loras = 1;
  s.prompt_tokens_total = num_prompt_;
  s.generation_tokens_total = num_generated_;
  s.request_success_total = num_success_;
  s.time_to_first_token_seconds = Histogram({0.001, 0.01, 0.1});
  s.time_to_first_token_seconds.observe(0.005);
  return s;
}

void FakeEngine::shutdown(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
  }
  while (num_running() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, job] : jobs_) job->aborted = true;
  }
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    threads.swap(threads_);
  }
  for (auto& t : threads) t.join();
}

std::vector<AsyncEngine::LoraInfo> FakeEngine::loras() const {
  std::lock_guard<std::mutex> lock(mu_);
  return loras_;
}

int32_t FakeEngine::lora_id(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& l : loras_)
    if (l.name == name) return l.id;
  return 0;
}

void FakeEngine::load_lora(const std::string& name, const std::string& path) {
  if (!opts_.enable_lora) AsyncEngine::load_lora(name, path);
  if (path.find("missing") != std::string::npos) throw Error("LoRA adapter " + path + ": no adapter_config.json");
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& l : loras_)
    if (l.name == name) throw Error("The lora adapter '" + name + "' has already been loaded.");
  loras_.push_back({name, path, next_lora_++});
}

void FakeEngine::unload_lora(const std::string& name) {
  if (!opts_.enable_lora) AsyncEngine::unload_lora(name);
  std::lock_guard<std::mutex> lock(mu_);
  auto n = std::erase_if(loras_, [&](const LoraInfo& l) { return l.name == name; });
  if (n == 0) throw Error("The lora adapter '" + name + "' cannot be found.");
}

}  // namespace vireo::testing
