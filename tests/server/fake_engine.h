// Test doubles for the server: a byte-level tokenizer and an AsyncEngine that produces
// deterministic tokens on a thread per request, with a configurable delay per token.
//   tokens: ids 0..255 are bytes; 256 = "<eos>", 257 = "<bos>" (added when add_special_tokens).
//   output token k of a request = 'a' + (base + k) % 26, base = last prompt id + seed (if any).
//   a prompt containing the text "FAIL" finishes with "error" after one token ("GRAMMAR_FAIL": with
//   the engine's error for a grammar it could not match, flagged as the request's fault).
//   a prompt containing "QUIET" has its first 3 tokens' text held back (empty) and released with the
//   4th token's, as a detokenizer holds the bytes of an unfinished UTF-8 character.
//   scripts: a prompt containing a script's key produces the script's text instead (one byte per
//   token), then finishes with "stop" as at an EOS (or "length" at max_tokens).
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine/async_engine.h"
#include "model/model_config.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace vireo::testing {

class ByteTokenizer : public Tokenizer {
 public:
  static constexpr int32_t kEos = 256, kBos = 257;
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const override;
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const override;
  int32_t vocab_size() const override { return 260; }
  std::optional<int32_t> token_to_id(std::string_view token) const override;
  std::string id_to_token(int32_t id) const override;
  bool is_special(int32_t id) const override { return id >= 256; }
  std::optional<std::string> bos_token() const override { return "<bos>"; }
  std::optional<std::string> eos_token() const override { return "<eos>"; }
  std::optional<int32_t> bos_token_id() const override { return kBos; }
  std::optional<int32_t> eos_token_id() const override { return kEos; }
  const std::string& chat_template() const override { return template_; }
  std::string template_;
};

struct FakeEngineOptions {
  int max_model_len = 256;
  std::chrono::milliseconds token_delay{1};
  bool with_chat_template = true;
  std::string chat_template;  // "" = the default "<role>content\n...<assistant>" template
  std::vector<std::pair<std::string, std::string>> scripts;  // prompt substring -> output text (non-empty)
  std::string scheduling_policy = "fcfs";  // what config() reports (the server checks "priority" against it)
  bool enable_lora = false;  // load_lora / unload_lora keep a list (no weights); loras() reports it
  // --runner pooling: requests finish at once with an 8-wide embedding: [prompt length, first id, last id,
  // sum of ids, 1, 0, 0, 0] scaled to unit length ("FAIL" prompts fail as usual).
  bool pooling = false;
  // With pooling: a sequence classifier with these labels; its outputs are labels.size() logits, logit c =
  // 0.1 * (c + 1) * (last prompt id - 100).
  std::vector<std::string> labels;
  bool matryoshka = false;              // PoolingSpec::matryoshka / matryoshka_dims as reported by config()
  std::vector<int> matryoshka_dims;
};

class FakeEngine : public AsyncEngine {
 public:
  explicit FakeEngine(FakeEngineOptions opts = {});
  ~FakeEngine() override;

  std::shared_ptr<RequestStream> add_request(const std::string& request_id, std::vector<int32_t> prompt_token_ids,
                                             const SamplingParams& params) override;
  void abort(const std::string& request_id) override;
  const Tokenizer& tokenizer() const override { return tok_; }
  const ChatTemplate* chat_template() const override { return chat_template_.get(); }
  const ModelConfig& model_config() const override { return model_config_; }
  const GenerationConfig& generation_config() const override { return generation_config_; }
  const EngineConfig& config() const override { return config_; }
  int max_model_len() const override { return opts_.max_model_len; }
  EngineStats stats() const override;
  void shutdown(std::chrono::milliseconds timeout) override;
  std::vector<LoraInfo> loras() const override;
  int32_t lora_id(const std::string& name) const override;
  void load_lora(const std::string& name, const std::string& path) override;
  void unload_lora(const std::string& name) override;

  // The tokens a request would produce (no stop conditions), for expectations.
  static std::string expected_text(const std::vector<int32_t>& prompt, int num_tokens, std::optional<uint64_t> seed = {});

  int num_running() const;
  // While held, requests whose prompt contains "HOLD" pause after 10 tokens.
  void set_hold(bool hold) { hold_ = hold; }
  uint64_t num_generated() const { return num_generated_; }
  uint64_t num_aborted() const { return num_aborted_; }
  uint64_t num_added() const { return num_added_; }
  // The sampling params of the last request added (as the server filled them).
  SamplingParams last_params() const {
    std::lock_guard<std::mutex> lock(mu_);
    return last_params_;
  }

 private:
  struct Job;
  void run_job(std::shared_ptr<Job> job);
  FakeEngineOptions opts_;
  ByteTokenizer tok_;
  std::unique_ptr<ChatTemplate> chat_template_;
  ModelConfig model_config_;
  GenerationConfig generation_config_;
  EngineConfig config_;
  std::vector<LoraInfo> loras_;  // under mu_
  int32_t next_lora_ = 1;
  mutable std::mutex mu_;
  SamplingParams last_params_;
  std::map<std::string, std::shared_ptr<Job>> jobs_;
  std::vector<std::thread> threads_;
  std::atomic<uint64_t> num_aborted_{0}, num_added_{0}, num_generated_{0}, num_prompt_{0}, num_success_{0};
  bool stopped_ = false;
  std::atomic<bool> hold_{false};
};

}  // namespace vireo::testing
