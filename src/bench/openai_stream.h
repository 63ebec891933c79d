// Request bodies for the OpenAI completions / chat endpoints and the handler that turns a
// streamed (SSE) answer into a RequestResult, timing chunks as vLLM's request functions do.
#pragma once
#include <functional>
#include <string>

#include "bench/epoll_http_client.h"
#include "bench/serve_metrics.h"
#include "bench/stream_chunk.h"

namespace vireo::bench {

// "openai" | "vllm" -> completions, "openai-chat" -> chat; throws vireo::Error otherwise.
Backend parse_backend(const std::string& name);

// Streaming, greedy (temperature 0), stream_options.include_usage, max_tokens = output_len; `extra` (a JSON
// object as text, or empty: vLLM bench's sampling flags and --extra-body) is merged over those fields.
std::string build_request_body(Backend backend, const std::string& model, const std::string& prompt,
                               int output_len, bool ignore_eos, const std::string& extra = "");

class OpenAIStreamHandler : public StreamHandler {
 public:
  // `result` is filled in; `on_done` runs once the request has ended either way.
  OpenAIStreamHandler(Backend backend, RequestResult* result, double start_time_s, std::function<void()> on_done);
  void on_status(int status, double now_s) override;
  void on_body(std::string_view data, double now_s) override;
  void on_complete(double now_s) override;
  void on_error(const std::string& message, double now_s) override;

 private:
  // Dispatches the complete events at the front of `in`; returns where the unfinished one starts.
  size_t split_events(std::string_view in, double now_s);
  void handle_event(std::string_view payload, double now_s);

  Backend backend_;
  RequestResult* r_;
  double start_;
  std::function<void()> on_done_;
  int status_ = 0;
  std::string buf_;       // SSE bytes of an event not complete yet
  StreamChunk chunk_;     // reused for every event
  std::string err_body_;  // non-200 body
  bool got_first_ = false;
  double last_ts_ = 0;
};

}  // namespace vireo::bench
