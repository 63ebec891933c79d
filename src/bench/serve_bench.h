// `vireo bench serve`: drives an OpenAI-compatible server with streamed requests at a given
// arrival rate / concurrency and reports vLLM's serving metrics (vllm bench serve).
#pragma once
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench/load_runner.h"

namespace vireo::bench {

struct ServeBenchArgs {
  std::string backend = "openai";
  std::string base_url;  // overrides host/port when set
  bool insecure = false;  // https: any server certificate (vLLM bench's --insecure)
  std::string ca_file;    // https: PEM CAs to check the server's certificate against (default: the system's)
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string endpoint;  // "" = /v1/completions or /v1/chat/completions
  std::string model;     // "" = the first model of GET /v1/models
  std::string served_model_name;
  std::vector<std::string> lora_modules;  // vLLM's --lora-modules: requests name one at random
  std::string tokenizer;
  std::string dataset_name = "sonnet";
  std::string dataset_path;
  int num_prompts = 1000;
  double request_rate = INFINITY;
  double burstiness = 1.0;
  std::string ramp_up_strategy;  // vLLM's --ramp-up-strategy (linear | exponential), with the two rates below
  double ramp_up_start_rps = 0, ramp_up_end_rps = 0;
  std::optional<int> max_concurrency;
  int random_input_len = 1024, random_output_len = 128, random_prefix_len = 0;
  double random_range_ratio = 0.0;
  int sonnet_input_len = 550, sonnet_output_len = 150, sonnet_prefix_len = 200;
  int custom_output_len = 256;
  int prefix_repetition_prefix_len = 256, prefix_repetition_suffix_len = 256, prefix_repetition_num_prefixes = 10,
      prefix_repetition_output_len = 128;
  std::optional<int> sharegpt_output_len;  // unset: each conversation's second turn's length
  bool disable_shuffle = false;            // custom / sharegpt: the file's order
  bool ignore_eos = false;
  // vLLM bench serve's sampling flags (unset: greedy, temperature 0) and --extra-body (a JSON object), merged
  // into every request in that order.
  std::optional<double> temperature, top_p, min_p, frequency_penalty, presence_penalty, repetition_penalty;
  std::optional<int> top_k;
  std::string extra_body;
  std::optional<int> logprobs;  // sent as logprobs (completions) or logprobs + top_logprobs (chat)
  // HTTP headers of every request (KEY=VALUE; $OPENAI_API_KEY adds "Authorization: Bearer <key>", as vLLM's
  // bench does) and vLLM's --request-id-prefix (an x-request-id header of prefix + the request's index).
  std::vector<std::string> headers;
  std::string request_id_prefix;
  uint64_t seed = 0;
  int num_warmups = 0;
  std::string percentile_metrics = "ttft,tpot,itl";
  std::string metric_percentiles = "99";
  std::vector<std::string> goodput;
  bool save_result = false;
  bool save_detailed = false;  // keep the per-request arrays (input_lens, ttfts, itls, ...) in the result
  bool append_result = false;  // append to the result file (one JSON object a line) instead of replacing it
  std::vector<std::string> metadata;  // KEY=VALUE pairs added to the result
  std::string result_dir;
  std::string result_filename;
  std::string label;
  bool disable_tqdm = false;
  double request_timeout_s = 6 * 3600;
  double ready_check_timeout_s = 600;
};

// The JSON object the sampling flags and --extra-body add to each request ("" when none); throws
// vireo::Error for an --extra-body that is not a JSON object.
std::string request_extra_body(const ServeBenchArgs& args);

// The headers every request carries: --header KEY=VALUE pairs, then Authorization from $OPENAI_API_KEY unless
// a --header gave one; throws vireo::Error for a pair without '='.
std::vector<std::pair<std::string, std::string>> request_headers(const ServeBenchArgs& args);

// The whole command: datasets, ready check, warmups, run, report, JSON. Returns the exit code.
int run_bench_serve(const ServeBenchArgs& args);

}  // namespace vireo::bench
