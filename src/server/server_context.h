// State shared by the HTTP handlers: the engine (null while it loads), what validation needs,
// the registry of in-flight engine requests (for draining and aborting on shutdown) and the
// finish-reason counters behind vllm:request_success_total.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "engine/async_engine.h"
#include "server/cors.h"
#include "server/metrics_renderer.h"
#include "server/request_types.h"
#include "server/responses_store.h"
#include "server/tls_server.h"

namespace vireo::server {

struct ServerOptions {
  std::string host = "0.0.0.0";  // vLLM/uvicorn listen on all interfaces by default
  int port = 8000;               // 0 = any free port
  // vLLM's --uds: listen on this Unix domain socket path instead of host:port (a stale socket file there
  // is replaced; the file is removed when the server stops).
  std::string uds;
  std::optional<std::string> api_key;
  std::vector<std::string> more_api_keys;  // vLLM's `--api-key a b`: any one of them is accepted
  std::string served_model_name;  // "" = the engine config's served_model_name, else its model path
  // More names the model answers to (vLLM's `--served-model-name a b c`: every name is listed and
  // accepted; responses carry the first).
  std::vector<std::string> served_model_aliases;
  size_t max_body_bytes = 32u << 20;  // larger bodies get 413
  int num_threads = 64;               // connections served at once (a stream holds one)
  double shutdown_timeout_s = 30.0;   // drain time for in-flight requests on SIGTERM/SIGINT
  int keep_alive_timeout_s = 5;
  // VLLM_ALLOW_RUNTIME_LORA_UPDATING: /v1/load_lora_adapter and /v1/unload_lora_adapter answer (else 404).
  bool allow_runtime_lora_updating = false;
  size_t keep_alive_max_requests = 100000;  // requests on one connection before the server closes it
  ValidationLimits limits;
  // Chat output parsing (vLLM's flags; names in reasoning_parser.cc / tool_parser.cc); "" = off.
  std::string reasoning_parser;
  std::string tool_call_parser;
  bool enable_auto_tool_choice = false;
  CorsOptions cors;  // --allowed-origins / --allowed-methods / --allowed-headers / --allow-credentials
  size_t responses_store_bytes = 64u << 20;  // stored /v1/responses for previous_response_id; 0 = none
  // vLLM's --enable-prompt-tokens-details: usage.prompt_tokens_details = {"cached_tokens": N} (prefix cache hits).
  bool enable_prompt_tokens_details = false;
  // vLLM's --return-tokens-as-token-ids: the default of the request field return_tokens_as_token_ids.
  bool return_tokens_as_token_ids = false;
  // vLLM's --enable-force-include-usage: every stream ends with a usage chunk, whatever stream_options say.
  bool enable_force_include_usage = false;
  // vLLM's --enable-request-id-headers: every response carries X-Request-Id (the request's, else a new one).
  bool enable_request_id_headers = false;
  TlsOptions tls;  // HTTPS when tls.certfile is set (vLLM's --ssl-* flags)
  // vLLM's --enable-tokenizer-info-endpoint: GET /tokenizer_info answers (else 404).
  bool enable_tokenizer_info_endpoint = false;
};

// The request fields whose defaults are server flags (R: ChatRequest or CompletionRequest):
// return_tokens_as_token_ids when the body leaves it out (vLLM: the request's value wins when given), whether
// usage reports prompt_tokens_details, and whether a stream reports usage.
template <typename R>
void apply_server_defaults(const ServerOptions& o, const nlohmann::ordered_json& body, R& r) {
  if (auto it = body.find("return_tokens_as_token_ids"); it == body.end() || it->is_null())
    r.tokens_as_ids = o.return_tokens_as_token_ids;
  r.tokens_details = o.enable_prompt_tokens_details;
  if (o.enable_force_include_usage) r.include_usage = true;
}

class ServerContext {
 public:
  explicit ServerContext(ServerOptions options)
      : options_(std::move(options)), responses_store_(options_.responses_store_bytes) {}

  const ServerOptions& options() const { return options_; }

  void set_engine(std::shared_ptr<AsyncEngine> engine);
  std::shared_ptr<AsyncEngine> engine() const;  // null while loading
  void set_load_error(std::string message);
  std::optional<std::string> load_error() const;
  ModelInfo model_info() const;  // only once the engine is set

  // Unique ids: "<prefix>-<32 hex>".
  std::string new_id(const char* prefix);

  // In-flight engine requests.
  void register_request(const std::string& id);
  void unregister_request(const std::string& id);
  size_t num_in_flight() const;
  // Waits until no request is in flight or the deadline passes; true when drained.
  bool wait_drained(std::chrono::steady_clock::time_point deadline);
  void abort_all_in_flight();

  ResponsesStore& responses_store() { return responses_store_; }

  void count_finish(const std::string& reason);
  FinishCounts finish_counts() const;

  std::atomic<bool> draining{false};      // refuse new generation requests
  std::atomic<int> active_jobs{0};        // generation handlers / streams still writing
  // Generation handlers running plus streams whose writer has not started yet. cpp-httplib
  // skips a chunked writer that has not started once the listener is stopped, so shutdown
  // waits for this to reach zero before closing the listening socket.
  std::atomic<int> num_starting{0};
  std::atomic<bool> aborting_all{false};  // aborts now come from the shutdown, not the engine

 private:
  ServerOptions options_;
  ResponsesStore responses_store_;
  mutable std::mutex mu_;
  std::condition_variable drained_cv_;
  std::shared_ptr<AsyncEngine> engine_;
  ModelInfo model_info_;
  std::optional<std::string> load_error_;
  std::set<std::string> in_flight_;
  FinishCounts finish_counts_;
  uint64_t id_counter_ = 0;
};

}  // namespace vireo::server
