// vLLM flags that scripts written for `vllm serve` pass and that have one meaning here: accepted so
// such command lines run unchanged, checked where only some values are possible (one GPU; the
// quantizations and KV-cache dtypes vireo has), and otherwise without effect, each for the reason given in
// its help.
#pragma once
#include <CLI/CLI.hpp>
#include <string>

#include "cli/vllm_compat_extra.h"

namespace vireo {

struct VllmCompatFlags {
  int tensor_parallel_size = 1, pipeline_parallel_size = 1, data_parallel_size = 1;
  std::string kv_cache_dtype = "auto", quantization;
  bool trust_remote_code = false, disable_log_requests = false, enable_log_requests = false,
       disable_log_stats = false, enable_chunked_prefill = true, disable_uvicorn_access_log = false;
  double swap_space = 4;
  std::string uvicorn_log_level = "info", tokenizer_mode = "auto";
  bool disable_fastapi_docs = false, disable_custom_all_reduce = false, disable_frontend_multiprocessing = false;
  int max_parallel_loading_workers = 0, max_seq_len_to_capture = 8192;
  std::string download_dir, revision, tokenizer_revision, response_role = "assistant", guided_decoding_backend = "auto";
  // vLLM flags about features vireo has no counterpart for (multimodal inputs, torch.compile, cascade
  // attention, partial prefills, sleep mode, proxies, executors, model implementations, downloads).
  std::string limit_mm_per_prompt, compilation_config, optimization_level, root_path, distributed_executor_backend,
      model_impl = "auto", hf_token, preemption_mode, logprobs_mode = "raw_logprobs",
      chat_template_content_format = "auto", model_loader_extra_config, attention_backend;
  int max_num_partial_prefills = 1, max_long_partial_prefills = 1, long_prefill_token_threshold = 0;
  int max_log_len = 0, api_server_count = 1, h11_max_incomplete_event_size = 0, h11_max_header_count = 0;
  std::string structured_outputs_config;  // JSON; its "backend" is checked as --guided-decoding-backend
  bool disable_cascade_attn = false, enable_sleep_mode = false, enable_log_outputs = false,
       enable_server_load_tracking = false, disable_sliding_window = false, calculate_kv_scales = false;
  std::string prefix_caching_hash_algo = "sha256", lora_dtype = "auto", code_revision;
  bool fully_sharded_loras = false, log_error_stack = false, skip_tokenizer_init = false;
  double cpu_offload_gb = 0;
  bool enable_expert_parallel = false, kv_sharing_fast_prefill = false;
  int max_cudagraph_capture_size = -1;  // -1: not given (the graphs' own cap)
  std::string config_format = "auto", kv_transfer_config, otlp_traces_endpoint, collect_detailed_traces;
  double mm_processor_cache_gb = 4;
  std::string safetensors_load_strategy = "lazy", mm_encoder_tp_mode = "weights";
  bool skip_mm_profiling = false, enable_ssl_refresh = false;
  VllmExtraFlags extra;  // vllm_compat_extra.h: deployment, plugin, observability and multimodal flags
};

void add_vllm_compat_flags(CLI::App& app, VllmCompatFlags& f);
// Throws vireo::Error for values vireo cannot honour (e.g. --tensor-parallel-size 2).
void check_vllm_compat_flags(const VllmCompatFlags& f);

}  // namespace vireo
