// The load generator of `bench serve`: streamed OpenAI requests sent on an arrival schedule
// under a concurrency cap, through the epoll client, one result per request.
#pragma once
#include <chrono>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench/arrival.h"

#include "bench/datasets.h"
#include "bench/openai_stream.h"
#include "bench/serve_metrics.h"

namespace vireo::bench {

struct Endpoint {
  std::string host;
  int port = 80;
  std::string path_prefix;  // from --base-url, e.g. "/proxy"
  bool tls = false;         // https://
};
// "http[s]://host[:port]/prefix" -> Endpoint (ports 80 / 443 by default); throws vireo::Error.
Endpoint parse_base_url(const std::string& url);

// Sends `requests` (and nothing else) with the given arrival process and concurrency cap.
// Returns one result per request, in order; `duration_s` is first send -> last end.
struct LoadOptions {
  Backend backend = Backend::kCompletions;
  std::string host = "127.0.0.1";
  int port = 8000;
  ClientTls tls;  // HTTPS
  std::string path = "/v1/completions";
  std::string model;
  // vLLM bench's --lora-modules: each request names one of these (picked at random by seed), else `model`.
  std::vector<std::string> lora_modules;
  double request_rate = INFINITY;
  double burstiness = 1.0;
  RampUp ramp_up;  // strategy set: the rate follows it instead of request_rate
  std::optional<int> max_concurrency;
  uint64_t seed = 0;
  bool ignore_eos = false;
  std::string extra_body;  // a JSON object merged into every request body (build_request_body), or empty
  std::vector<std::pair<std::string, std::string>> headers;  // sent with every request
  std::string request_id_prefix;  // non-empty: an x-request-id header of the prefix and the request's index
  bool progress = false;
  double request_timeout_s = 0;
};
// `origin` (optional) receives the steady_clock instant that start times are relative to.
std::vector<RequestResult> run_load(const std::vector<SampleRequest>& requests, const LoadOptions& opt,
                                    double* duration_s,
                                    std::chrono::steady_clock::time_point* origin = nullptr);

}  // namespace vireo::bench
