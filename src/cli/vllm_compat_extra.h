// More of `vllm serve`'s flags (vLLM v0.18's list), beyond vllm_compat_flags.h: multi-node and data-parallel
// deployment, plugins, observability and multimodal settings. As there: accepted where the value cannot change
// what vireo serves (a warning names what is ignored), refused with the reason where it would.
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace vireo {

struct VllmExtraFlags {
  bool headless = false, grpc = false, tokens_only = false;
  // Data parallelism and multi-node: one process on one device (rank 0 of 1).
  int data_parallel_rank = -1, data_parallel_start_rank = 0, data_parallel_size_local = -1, nnodes = 1,
      node_rank = 0, decode_context_parallel_size = 1, prefill_context_parallel_size = 1;
  std::string data_parallel_address, data_parallel_backend = "mp", master_addr;
  int data_parallel_rpc_port = 0, master_port = 0;
  bool data_parallel_hybrid_lb = false, data_parallel_external_lb = false;
  // Values with no effect here (one device, text only, no Python): each listed in `ignored` when given.
  std::vector<std::string> ignored;
  // Values vireo cannot honour: refused when given (flag name -> value).
  std::vector<std::pair<std::string, std::string>> refused;
  std::string mamba_cache_dtype = "auto", mamba_ssm_cache_dtype = "auto";
  std::string additional_config, attention_config, kv_events_config;
};

void add_vllm_extra_flags(CLI::App& app, VllmExtraFlags& f);
// Throws vireo::Error for a value vireo cannot honour; logs one warning listing the flags without effect.
void check_vllm_extra_flags(const VllmExtraFlags& f);

}  // namespace vireo
