#include "cli/vllm_compat_extra.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"

namespace vireo {
namespace {

const char* kGroup = "vLLM compatibility";

// A flag or option accepted without effect: listed in f.ignored when given (a boolean only when true).
void ignored_flag(CLI::App& app, VllmExtraFlags& f, const std::string& name, const std::string& why) {
  const std::string first = name.substr(0, name.find(','));
  app.add_flag_callback(name, [&f, first] { f.ignored.push_back(first); }, "No effect: " + why)->group(kGroup);
}
void ignored_option(CLI::App& app, VllmExtraFlags& f, const std::string& name, const std::string& why) {
  app.add_option_function<std::string>(name, [&f, name](const std::string& v) { f.ignored.push_back(name + " " + v); },
                                       "No effect: " + why)
      ->group(kGroup);
}
// Refused when given: what it asks for would change what is served, and vireo cannot do it.
void refused_flag(CLI::App& app, VllmExtraFlags& f, const std::string& name, const std::string& why) {
  app.add_flag_callback(name, [&f, name, why] { f.refused.emplace_back(name, why); }, "Not supported: " + why)
      ->group(kGroup);
}
void refused_option(CLI::App& app, VllmExtraFlags& f, const std::string& name, const std::string& why) {
  app.add_option_function<std::string>(name, [&f, name, why](const std::string& v) {
       f.refused.emplace_back(name + " " + v, why);
     }, "Not supported: " + why)
      ->group(kGroup);
}

nlohmann::json json_object(const std::string& flag, const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) throw Error(flag + ": expected a JSON object");
  return j;
}

}  // namespace

void add_vllm_extra_flags(CLI::App& app, VllmExtraFlags& f) {
  const std::string g = kGroup;
  app.add_flag("--headless", f.headless, "Not supported: the engine always runs with its HTTP server (no multi-node)")
      ->group(g);
  app.add_flag("--grpc", f.grpc, "Not supported: the OpenAI-compatible HTTP server only")->group(g);
  app.add_flag("--tokens-only", f.tokens_only, "Not supported: every endpoint is served")->group(g);
  // Data parallelism / multi-node: the one value of a single process on one device (also -dpn, -dpr, ...).
  app.add_option("--data-parallel-rank", f.data_parallel_rank, "Only 0 (one engine); also -dpn")->group(g);
  app.add_option("--data-parallel-start-rank", f.data_parallel_start_rank, "Only 0; also -dpr")->group(g);
  app.add_option("--data-parallel-size-local", f.data_parallel_size_local, "Only 1; also -dpl")->group(g);
  app.add_option("--data-parallel-address", f.data_parallel_address, "No effect: no data parallelism (also -dpa)")
      ->group(g);
  app.add_option("--data-parallel-rpc-port", f.data_parallel_rpc_port, "No effect (as above; also -dpp)")->group(g);
  app.add_option("--data-parallel-backend", f.data_parallel_backend, "mp | ray: no effect (as above; also -dpb)")
      ->check(CLI::IsMember({"mp", "ray"}))
      ->group(g);
  app.add_flag("--data-parallel-hybrid-lb,!--no-data-parallel-hybrid-lb", f.data_parallel_hybrid_lb,
               "No effect (as above; also -dph)")
      ->group(g);
  app.add_flag("--data-parallel-external-lb,!--no-data-parallel-external-lb", f.data_parallel_external_lb,
               "No effect (as above; also -dpe)")
      ->group(g);
  app.add_option("--nnodes,-n", f.nnodes, "Only 1 (one node)")->group(g);
  app.add_option("--node-rank,-r", f.node_rank, "Only 0")->group(g);
  app.add_option("--master-addr", f.master_addr, "No effect: one node")->group(g);
  app.add_option("--master-port", f.master_port, "No effect: one node")->group(g);
  app.add_option("--decode-context-parallel-size", f.decode_context_parallel_size, "Only 1; also -dcp")->group(g);
  app.add_option("--prefill-context-parallel-size", f.prefill_context_parallel_size, "Only 1; also -pcp")->group(g);
  for (const char* name : {"--dcp-kv-cache-interleave-size", "--cp-kv-cache-interleave-size", "--all2all-backend",
                           "--ubatch-size", "--dbo-decode-token-threshold", "--dbo-prefill-token-threshold",
                           "--eplb-config", "--expert-placement-strategy", "--worker-cls", "--worker-extension-cls"})
    ignored_option(app, f, name, "one device, one process (no collective communication, no workers)");
  for (const char* name : {"--enable-dbo", "--enable-eplb", "--disable-nccl-for-dp-synchronization",
                           "--ray-workers-use-nsight", "--aggregate-engine-logging"})
    ignored_flag(app, f, name, "one device, one process");
  // Frontend settings without a counterpart here.
  ignored_option(app, f, "--disable-access-log-for-endpoints", "no access log is written");
  ignored_option(app, f, "--log-config-file", "vireo's log lines go to stderr in one format");
  ignored_flag(app, f, "--enable-log-deltas,--no-enable-log-deltas", "outputs are not logged");
  ignored_flag(app, f, "--enable-offline-docs", "no documentation pages are served");
  ignored_flag(app, f, "--fail-on-environ-validation,--no-fail-on-environ-validation", "no VLLM_* environment checks");
  ignored_option(app, f, "--tool-parser-plugin",
                 "no Python plugins; --tool-call-parser takes the built-in names (others are refused)");
  ignored_option(app, f, "--reasoning-parser-plugin",
                 "no Python plugins; --reasoning-parser takes the built-in names (others are refused)");
  refused_option(app, f, "--middleware", "no Python ASGI middleware can run here");
  refused_option(app, f, "--tool-server", "no built-in or MCP tool servers for /v1/responses");
  refused_option(app, f, "--logits-processors", "no custom (Python) logits processors");
  refused_option(app, f, "--io-processor-plugin", "no Python IO processor plugins");
  refused_option(app, f, "--scheduler-cls", "vireo's own scheduler only");
  refused_option(app, f, "--hf-config-path", "config.json is read from the model folder (see --hf-overrides)");
  refused_option(app, f, "--override-attention-dtype", "attention runs in the model's dtype");
  refused_option(app, f, "--ec-transfer-config", "no disaggregated encoders (text-only serving)");
  refused_flag(app, f, "--enable-prompt-embeds", "requests with prompt_embeds are not served");
  // Models, loading, observability and multimodal settings that cannot change the output.
  ignored_option(app, f, "--logits-processor-pattern", "no custom logits processors (requests may not name one)");
  ignored_option(app, f, "--ignore-patterns", "models are local folders; only the files vireo reads are read");
  ignored_flag(app, f, "--use-tqdm-on-load,--no-use-tqdm-on-load", "no progress bars");
  ignored_option(app, f, "--pt-load-map-location", "no PyTorch .pt checkpoints");
  ignored_option(app, f, "--show-hidden-metrics-for-version", "no metrics are hidden: /metrics serves them all");
  for (const char* name : {"--kv-cache-metrics", "--cudagraph-metrics", "--enable-layerwise-nvtx-tracing",
                           "--enable-mfu-metrics", "--disable-chunked-mm-input", "--disable-hybrid-kv-cache-manager",
                           "--enable-mm-embeds", "--interleave-mm-strings"})
    ignored_flag(app, f, name, "no counterpart here (text-only serving, vireo's own metrics on /metrics)");
  for (const char* name : {"--kv-cache-metrics-sample", "--profiler-config", "--allowed-local-media-path",
                           "--allowed-media-domains", "--media-io-kwargs", "--mm-processor-kwargs",
                           "--mm-processor-cache-type", "--mm-shm-cache-max-object-size-mb",
                           "--mm-encoder-attn-backend", "--video-pruning-rate", "--default-mm-loras",
                           "--gdn-prefill-backend", "--mamba-block-size", "--kv-offloading-size",
                           "--kv-offloading-backend", "--stream-interval"})
    ignored_option(app, f, name,
                   "no counterpart here (text-only serving; no profiler endpoints; no KV offloading; every token is "
                   "streamed as it comes)");
  app.add_option("--mamba-cache-dtype", f.mamba_cache_dtype, "auto only: recurrent state in the model's dtype")
      ->group(g);
  app.add_option("--mamba-ssm-cache-dtype", f.mamba_ssm_cache_dtype, "auto only (as --mamba-cache-dtype)")->group(g);
  app.add_option("--additional-config", f.additional_config, "JSON object for platform plugins; no effect")->group(g);
  app.add_option("--attention-config", f.attention_config,
                 "JSON object; no effect: vireo picks its attention kernels per step (also -ac)")
      ->group(g);
  app.add_option("--kv-events-config", f.kv_events_config,
                 "JSON; enable_kv_cache_events true is not supported (no KV cache event publisher)")
      ->group(g);
}

void check_vllm_extra_flags(const VllmExtraFlags& f) {
  if (f.headless) throw Error("--headless: not supported (vireo runs one engine with its HTTP server; no multi-node)");
  if (f.grpc) throw Error("--grpc: not supported (vireo serves the OpenAI-compatible HTTP API only)");
  if (f.tokens_only) throw Error("--tokens-only: not supported (every endpoint is served)");
  if ((f.data_parallel_rank != -1 && f.data_parallel_rank != 0) || f.data_parallel_start_rank != 0 ||
      (f.data_parallel_size_local != -1 && f.data_parallel_size_local != 1))
    throw Error("--data-parallel-rank / --data-parallel-start-rank / --data-parallel-size-local: vireo runs one "
                "engine on one device; only rank 0 and local size 1 are supported");
  if (f.nnodes != 1 || f.node_rank != 0) throw Error("--nnodes / --node-rank: one node only (1 and 0)");
  if (f.decode_context_parallel_size != 1 || f.prefill_context_parallel_size != 1)
    throw Error("--decode-context-parallel-size / --prefill-context-parallel-size: one device; only 1 is supported");
  if (f.mamba_cache_dtype != "auto" || f.mamba_ssm_cache_dtype != "auto")
    throw Error("--mamba-cache-dtype / --mamba-ssm-cache-dtype: only auto (the model's dtype) is supported");
  if (!f.additional_config.empty()) json_object("--additional-config", f.additional_config);
  if (!f.attention_config.empty()) json_object("--attention-config", f.attention_config);
  if (!f.kv_events_config.empty()) {
    const auto j = json_object("--kv-events-config", f.kv_events_config);
    if (j.value("enable_kv_cache_events", false))
      throw Error("--kv-events-config: enable_kv_cache_events is not supported (no KV cache event publisher)");
  }
  if (!f.refused.empty())
    throw Error(f.refused.front().first + ": not supported (" + f.refused.front().second + ")");
  std::string ignored;
  for (const auto& s : f.ignored) ignored += (ignored.empty() ? "" : ", ") + s;
  if (!f.data_parallel_address.empty() || f.data_parallel_rpc_port != 0 || f.data_parallel_hybrid_lb ||
      f.data_parallel_external_lb || !f.master_addr.empty() || f.master_port != 0)
    ignored += std::string(ignored.empty() ? "" : ", ") + "data-parallel / multi-node addresses";
  if (!f.additional_config.empty() || !f.attention_config.empty() || !f.kv_events_config.empty())
    ignored += std::string(ignored.empty() ? "" : ", ") + "--additional-config / --attention-config / --kv-events-config";
  if (!ignored.empty()) log_warn("vLLM flags without effect here, ignored: {}", ignored);
}

}  // namespace vireo
