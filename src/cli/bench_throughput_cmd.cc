// `vireo bench throughput`: many requests through the in-process engine (vllm bench throughput).
#include <memory>

#include "bench/offline_bench.h"
#include "cli/bench_engine_flags.h"
#include "cli/command_registry.h"

namespace {

vireo::CommandRunner setup_bench_throughput(CLI::App& app) {
  auto a = std::make_shared<vireo::bench::ThroughputArgs>();
  auto kv = std::make_shared<size_t>(0);
  vireo::add_bench_engine_flags(app, a->engine, kv);
  app.add_option("--num-prompts", a->num_prompts)->capture_default_str();
  app.add_option("--input-len", a->input_len)->capture_default_str();
  app.add_option("--output-len", a->output_len)->capture_default_str();
  app.add_option("--output-json", a->output_json, "Save the results as JSON");
  return [a, kv, &app]() {
    if (app.count("--kv-cache-memory-bytes")) a->engine.kv_cache_memory_bytes = *kv;
    return vireo::bench::run_bench_throughput(*a);
  };
}

const bool kRegistered = vireo::register_command("bench throughput", "Offline throughput of the in-process engine",
                                                 setup_bench_throughput);

}  // namespace
