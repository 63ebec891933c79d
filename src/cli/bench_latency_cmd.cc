// `vireo bench latency`: one batch at a time through the in-process engine (vllm bench latency).
#include <memory>

#include "bench/offline_bench.h"
#include "cli/bench_engine_flags.h"
#include "cli/command_registry.h"

namespace {

vireo::CommandRunner setup_bench_latency(CLI::App& app) {
  auto a = std::make_shared<vireo::bench::LatencyArgs>();
  auto kv = std::make_shared<size_t>(0);
  vireo::add_bench_engine_flags(app, a->engine, kv);
  app.add_option("--batch-size", a->batch_size)->capture_default_str();
  app.add_option("--input-len", a->input_len)->capture_default_str();
  app.add_option("--output-len", a->output_len)->capture_default_str();
  app.add_option("--num-iters-warmup", a->num_iters_warmup)->capture_default_str();
  app.add_option("--num-iters", a->num_iters)->capture_default_str();
  app.add_option("--output-json", a->output_json, "Save the results as JSON");
  return [a, kv, &app]() {
    if (app.count("--kv-cache-memory-bytes")) a->engine.kv_cache_memory_bytes = *kv;
    return vireo::bench::run_bench_latency(*a);
  };
}

const bool kRegistered =
    vireo::register_command("bench latency", "Latency of one batch: prefill and decode step times", setup_bench_latency);

}  // namespace
