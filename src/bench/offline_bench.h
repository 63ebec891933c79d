// `vireo bench latency` and `vireo bench throughput`: the engine in-process (vllm bench latency /
// throughput). Latency runs one batch of random prompts per iteration and splits its time into
// prefill (until every request has its first token) and decode steps; throughput pushes
// --num-prompts requests through the scheduler at once.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/engine_config.h"

namespace vireo::bench {

struct LatencyArgs {
  EngineConfig engine;
  int batch_size = 8;
  int input_len = 32;
  int output_len = 128;
  int num_iters_warmup = 10;
  int num_iters = 30;
  std::string output_json;
};

struct ThroughputArgs {
  EngineConfig engine;
  int num_prompts = 1000;
  int input_len = 1024;
  int output_len = 128;
  std::string output_json;
};

// One timed iteration of the latency benchmark (seconds).
struct LatencyIteration {
  double latency = 0;      // submit -> last request finished
  double prefill = 0;      // submit -> every request has its first token
  double decode = 0;       // latency - prefill
  int decode_steps = 0;    // output_len - 1
};

// Summary fields shared by `bench latency` and tools/bench/hf_generate.py (same names, same units).
nlohmann::json latency_summary_json(const std::vector<LatencyIteration>& iters, int batch_size, int input_len,
                                    int output_len);

int run_bench_latency(const LatencyArgs& args);
int run_bench_throughput(const ThroughputArgs& args);

}  // namespace vireo::bench
