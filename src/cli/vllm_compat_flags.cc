#include "cli/vllm_compat_flags.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <iterator>

#include "core/error.h"
#include "core/log.h"

namespace vireo {

void add_vllm_compat_flags(CLI::App& app, VllmCompatFlags& f) {
  const std::string g = "vLLM compatibility";
  app.add_option("--tensor-parallel-size", f.tensor_parallel_size, "Only 1 (one GPU); also -tp")->group(g);
  app.add_option("--pipeline-parallel-size", f.pipeline_parallel_size, "Only 1; also -pp")->group(g);
  app.add_option("--data-parallel-size", f.data_parallel_size, "Only 1; also -dp")->group(g);
  app.add_option("--kv-cache-dtype", f.kv_cache_dtype,
                 "auto (the model dtype) | fp8 | fp8_e4m3: K and V stored as FP8 E4M3 (scale 1, as vLLM without "
                 "checkpoint scales), twice the tokens in the same memory and half the decode attention's reads")
      ->group(g);
  app.add_flag("--calculate-kv-scales", f.calculate_kv_scales,
               "No effect: an FP8 KV cache (--kv-cache-dtype fp8) keeps scale 1 (vLLM's default without it)")
      ->group(g);
  app.add_option("--quantization,-q", f.quantization,
                 "gguf, mxfp4, fp8 or compressed-tensors, else not needed: GGUF files are read by their own types "
                 "(quantized weights kept packed on the CPU, dequantized at load on CUDA); GPT-OSS's MXFP4 experts "
                 "(checkpoint or GGUF) stay packed where the backend takes them (CPU; CUDA with bfloat16), which is "
                 "what mxfp4 asks for (VIREO_MXFP4=dequantize expands them at load instead); FP8 checkpoints (fp8: "
                 "block-wise or per-tensor scales; compressed-tensors float8) are read dequantized; fp8 (any "
                 "checkpoint or dummy weights) and compressed-tensors (an FP8 checkpoint) put the layers' "
                 "projections in FP8 E4M3 with one scale per output row, quantized at load (vLLM's online FP8): CUDA "
                 "keeps them in FP8 (W8A8 GEMMs, FP8-weight decode GEMV), and so does the CPU (an FP8 GEMV for "
                 "decode steps); other methods are not supported")
      ->group(g);
  app.add_flag("--trust-remote-code", f.trust_remote_code, "No effect: vireo never runs code from a model folder")
      ->group(g);
  app.add_flag("--disable-log-requests", f.disable_log_requests, "No effect: requests are not logged")->group(g);
  app.add_flag("--enable-log-requests", f.enable_log_requests, "No effect: requests are not logged")->group(g);
  app.add_flag("--disable-log-stats", f.disable_log_stats, "No effect: statistics are served on /metrics only")
      ->group(g);
  app.add_flag("--enable-chunked-prefill,!--no-enable-chunked-prefill", f.enable_chunked_prefill,
               "Always on (the scheduler has no prefill-only steps)")
      ->group(g);
  app.add_option("--swap-space", f.swap_space, "No effect: preempted requests are recomputed, never swapped")
      ->group(g);
  app.add_option("--uvicorn-log-level", f.uvicorn_log_level, "No effect")->group(g);
  app.add_flag("--disable-uvicorn-access-log", f.disable_uvicorn_access_log, "No effect: no access log")->group(g);
  app.add_option("--tokenizer-mode", f.tokenizer_mode, "auto | hf | slow: one tokenizer (tokenizer.json)")->group(g);
  app.add_flag("--disable-fastapi-docs", f.disable_fastapi_docs, "No effect: no documentation pages are served")
      ->group(g);
  app.add_option("--download-dir", f.download_dir, "No effect: models are local folders or files")->group(g);
  app.add_option("--revision", f.revision, "No effect: models are local folders or files")->group(g);
  app.add_option("--tokenizer-revision", f.tokenizer_revision, "No effect: tokenizers are local")->group(g);
  app.add_flag("--disable-custom-all-reduce", f.disable_custom_all_reduce, "No effect: one GPU")->group(g);
  app.add_flag("--disable-frontend-multiprocessing", f.disable_frontend_multiprocessing,
               "No effect: the server and the engine share one process")
      ->group(g);
  app.add_option("--max-parallel-loading-workers", f.max_parallel_loading_workers, "No effect")->group(g);
  app.add_option("--max-seq-len-to-capture", f.max_seq_len_to_capture,
                 "No effect: decode graphs serve every context length (they plan attention with a fixed hint)")
      ->group(g);
  app.add_option("--response-role", f.response_role, "Only assistant (the role of chat replies)")->group(g);
  app.add_option("--limit-mm-per-prompt", f.limit_mm_per_prompt,
                 "No effect: text-only serving (requests with image / audio parts are refused)")
      ->group(g);
  app.add_option("--compilation-config,-O", f.compilation_config,
                 "Its CUDA-graph settings: -O0 or {\"cudagraph_mode\": \"NONE\"} turn the decode graphs off, "
                 "cudagraph_capture_sizes / max_cudagraph_capture_size cap their batch (-O.key=value works too); no "
                 "torch.compile, so the rest has no effect (engine/compilation_config.h)")
      ->group(g);
  app.add_option("--optimization-level", f.optimization_level,
                 "0-3 as vLLM's: 0 turns the decode CUDA graphs off, 1-3 keep them (no torch.compile here)")
      ->group(g);
  app.add_flag("--disable-cascade-attn", f.disable_cascade_attn, "No effect: no cascade attention")->group(g);
  app.add_option("--max-num-partial-prefills", f.max_num_partial_prefills,
                 "No effect: any number of prompts share a step's token budget")
      ->group(g);
  app.add_option("--max-long-partial-prefills", f.max_long_partial_prefills, "No effect (as above)")->group(g);
  app.add_option("--long-prefill-token-threshold", f.long_prefill_token_threshold, "No effect (as above)")->group(g);
  app.add_flag("--enable-sleep-mode", f.enable_sleep_mode, "No effect: no sleep / wake_up endpoints")->group(g);
  app.add_option("--root-path", f.root_path,
                 "No effect: routes are served at /v1/... (a proxy in front strips its prefix)")
      ->group(g);
  app.add_flag("--enable-log-outputs", f.enable_log_outputs, "No effect: outputs are not logged")->group(g);
  app.add_flag("--enable-server-load-tracking", f.enable_server_load_tracking,
               "No effect: GET /load always answers {\"server_load\": running + waiting requests}, as /metrics")
      ->group(g);
  app.add_option("--distributed-executor-backend", f.distributed_executor_backend, "No effect: one process")->group(g);
  app.add_option("--model-impl", f.model_impl, "auto | vllm: vireo's own model code (transformers is not supported)")
      ->group(g);
  app.add_option("--hf-token", f.hf_token, "No effect: models are local folders or files")->group(g);
  app.add_option("--preemption-mode", f.preemption_mode, "recompute only (preempted requests run their tokens again)")
      ->group(g);
  app.add_option("--logprobs-mode", f.logprobs_mode,
                 "raw_logprobs only: logprobs of the model's logits before any sampling parameter")
      ->group(g);
  app.add_flag("--enable-ssl-refresh", f.enable_ssl_refresh,
               "Not supported: the TLS certificate is read at start-up (restart to load a new one)")
      ->group(g);
  app.add_flag("--skip-mm-profiling", f.skip_mm_profiling, "No effect: no multimodal encoder to profile")->group(g);
  app.add_option("--model-loader-extra-config", f.model_loader_extra_config,
                 "JSON object; no effect (safetensors and GGUF files are read one way)")
      ->group(g);
  app.add_option("--attention-backend", f.attention_backend,
                 "No effect: vireo picks its attention kernels per step (FLASH_ATTN, FLASHINFER, ... accepted)")
      ->group(g);
  app.add_option("--chat-template-content-format", f.chat_template_content_format,
                 "auto | string: a message's text parts reach the chat template as one string, joined by newlines")
      ->group(g);
  app.add_flag("--disable-sliding-window", f.disable_sliding_window,
               "Not supported: sliding-window layers keep their window")
      ->group(g);
  app.add_option("--guided-decoding-backend", f.guided_decoding_backend,
                 "auto | xgrammar | guidance | outlines | lm-format-enforcer: structured outputs have one backend")
      ->group(g);
  app.add_option("--structured-outputs-config", f.structured_outputs_config,
                 "JSON, as vLLM's: its backend as --guided-decoding-backend (one backend here); other keys no effect")
      ->group(g);
  app.add_option("--max-log-len", f.max_log_len, "No effect: requests are not logged (see --enable-log-requests)")->group(g);
  app.add_option("--api-server-count", f.api_server_count,
                 "No effect: one HTTP server, in the engine's process, serves every connection (also -asc; 0, "
                 "vLLM's headless mode, is refused)")
      ->group(g);
  app.add_option("--h11-max-incomplete-event-size", f.h11_max_incomplete_event_size,
                 "No effect: no h11 (request bodies are limited by --max-request-body-bytes)")
      ->group(g);
  app.add_option("--h11-max-header-count", f.h11_max_header_count, "No effect: no h11")->group(g);
  app.add_option("--prefix-caching-hash-algo", f.prefix_caching_hash_algo,
                 "No effect: prefix-cache blocks are keyed by vireo's own hash of their tokens and parent block")
      ->check(CLI::IsMember({"builtin", "sha256", "sha256_cbor", "sha256_cbor_64bit", "xxhash", "xxhash_cbor"}))
      ->group(g);
  app.add_option("--lora-dtype", f.lora_dtype, "auto only: adapters run in the model's dtype")->group(g);
  app.add_flag("--fully-sharded-loras", f.fully_sharded_loras, "No effect: one device")->group(g);
  app.add_flag("--log-error-stack", f.log_error_stack, "No effect: errors are logged with their message")->group(g);
  app.add_option("--code-revision", f.code_revision, "No effect: no model code is downloaded")->group(g);
  app.add_option("--cpu-offload-gb", f.cpu_offload_gb, "0 only: weights stay on the device")->group(g);
  app.add_flag("--skip-tokenizer-init", f.skip_tokenizer_init, "Not supported: requests are tokenized by the server")
      ->group(g);
  app.add_flag("--enable-expert-parallel", f.enable_expert_parallel,
               "No effect: one device holds every expert (also -ep)")
      ->group(g);
  app.add_option("--max-cudagraph-capture-size", f.max_cudagraph_capture_size,
                 "The largest decode batch captured as a CUDA graph (as -O.max_cudagraph_capture_size)")
      ->check(CLI::Range(0, 1 << 20))
      ->group(g);
  app.add_option("--structured-outputs-config.backend", f.guided_decoding_backend,
                 "As --guided-decoding-backend (vLLM's dotted form of --structured-outputs-config)")
      ->group(g);
  app.add_option("--config-format", f.config_format, "auto | hf: models are read from config.json (or GGUF)")
      ->group(g);
  app.add_option("--kv-transfer-config", f.kv_transfer_config,
                 "Not supported: no disaggregated prefill (KV caches stay in this process)")
      ->group(g);
  app.add_option("--otlp-traces-endpoint", f.otlp_traces_endpoint,
                 "No effect: no OpenTelemetry traces are exported (a warning says so); metrics are on /metrics")
      ->group(g);
  app.add_option("--collect-detailed-traces", f.collect_detailed_traces, "No effect (as --otlp-traces-endpoint)")
      ->group(g);
  app.add_option("--mm-processor-cache-gb", f.mm_processor_cache_gb, "No effect: text-only serving")->group(g);
  app.add_flag("--kv-sharing-fast-prefill", f.kv_sharing_fast_prefill,
               "No effect: no cross-layer KV sharing models")
      ->group(g);
  app.add_option("--safetensors-load-strategy", f.safetensors_load_strategy,
                 "No effect: safetensors files are memory-mapped and each tensor is read once")
      ->check(CLI::IsMember({"lazy", "eager"}))
      ->group(g);
  app.add_option("--mm-encoder-tp-mode", f.mm_encoder_tp_mode, "No effect: one device, text-only serving")
      ->check(CLI::IsMember({"weights", "data"}))
      ->group(g);
  add_vllm_extra_flags(app, f.extra);
}

void check_vllm_compat_flags(const VllmCompatFlags& f) {
  if (f.api_server_count < 1)
    throw Error("--api-server-count " + std::to_string(f.api_server_count) +
                ": vireo always runs its HTTP server (0, vLLM's headless mode, is not supported)");
  if (f.tensor_parallel_size != 1 || f.pipeline_parallel_size != 1 || f.data_parallel_size != 1)
    throw Error("--tensor-parallel-size / --pipeline-parallel-size / --data-parallel-size: vireo runs on one "
                "device; only 1 is supported");
  static const char* kKvDtypes[] = {"auto", "fp8", "fp8_e4m3", "bfloat16", "float16", "half", "float32", "float"};
  if (std::find(std::begin(kKvDtypes), std::end(kKvDtypes), f.kv_cache_dtype) == std::end(kKvDtypes))
    throw Error("--kv-cache-dtype " + f.kv_cache_dtype + ": not supported (auto, fp8, fp8_e4m3)");
  if (!f.quantization.empty() && f.quantization != "gguf" && f.quantization != "mxfp4" &&
      f.quantization != "fp8" && f.quantization != "compressed-tensors")
    throw Error("--quantization " + f.quantization +
                ": not supported (gguf, mxfp4, fp8, compressed-tensors: GGUF files and GPT-OSS's MXFP4 experts "
                "kept packed where the backend takes them, FP8 checkpoints dequantized at load)");
  if (f.tokenizer_mode != "auto" && f.tokenizer_mode != "hf" && f.tokenizer_mode != "slow")
    throw Error("--tokenizer-mode " + f.tokenizer_mode + ": not supported (auto)");
  if (f.response_role != "assistant")
    throw Error("--response-role " + f.response_role + ": only assistant is supported");
  auto known_backend = [](const std::string& b) {
    return b == "auto" || b == "xgrammar" || b == "guidance" || b == "outlines" || b == "lm-format-enforcer";
  };
  if (!known_backend(f.guided_decoding_backend))
    throw Error("--guided-decoding-backend " + f.guided_decoding_backend + ": unknown backend");
  if (!f.structured_outputs_config.empty()) {
    const auto j = nlohmann::json::parse(f.structured_outputs_config, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) throw Error("--structured-outputs-config: expected a JSON object, e.g. '{\"backend\": \"xgrammar\"}'");
    if (auto it = j.find("backend"); it != j.end() && !(it->is_string() && known_backend(it->get<std::string>())))
      throw Error("--structured-outputs-config: unknown backend " + it->dump() +
                  " (auto, xgrammar, guidance, outlines, lm-format-enforcer)");
  }
  if (f.model_impl != "auto" && f.model_impl != "vllm")
    throw Error("--model-impl " + f.model_impl + ": not supported (vireo runs its own model code: auto)");
  if (!f.preemption_mode.empty() && f.preemption_mode != "recompute")
    throw Error("--preemption-mode " + f.preemption_mode + ": only recompute is supported");
  if (f.logprobs_mode != "raw_logprobs")
    throw Error("--logprobs-mode " + f.logprobs_mode + ": only raw_logprobs is supported");
  if (f.enable_ssl_refresh) log_warn("--enable-ssl-refresh: not supported; the certificate is read once, at start-up");
  if (!f.model_loader_extra_config.empty()) {
    const auto j = nlohmann::json::parse(f.model_loader_extra_config, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) throw Error("--model-loader-extra-config: expected a JSON object");
  }
  if (f.chat_template_content_format != "auto" && f.chat_template_content_format != "string")
    throw Error("--chat-template-content-format " + f.chat_template_content_format +
                ": only auto and string are supported (text parts joined into one string)");
  if (f.disable_sliding_window)
    throw Error("--disable-sliding-window: not supported (sliding-window layers keep their window)");
  if (f.calculate_kv_scales)
    log_warn("--calculate-kv-scales: not supported; an FP8 KV cache keeps scale 1 (the values' own E4M3 codes)");
  if (!f.enable_chunked_prefill) log_warn("--no-enable-chunked-prefill: prefill stays chunked (vireo's scheduler)");
  if (f.lora_dtype != "auto") throw Error("--lora-dtype " + f.lora_dtype + ": only auto (the model's dtype) is supported");
  if (f.cpu_offload_gb != 0) throw Error("--cpu-offload-gb: weights are not offloaded; only 0 is supported");
  if (f.skip_tokenizer_init) throw Error("--skip-tokenizer-init: not supported (the server tokenizes every request)");
  if (f.config_format != "auto" && f.config_format != "hf")
    throw Error("--config-format " + f.config_format + ": only auto and hf are supported (config.json or GGUF)");
  if (!f.kv_transfer_config.empty())
    throw Error("--kv-transfer-config: not supported (no disaggregated prefill; KV caches stay in this process)");
  if (!f.otlp_traces_endpoint.empty() || !f.collect_detailed_traces.empty())
    log_warn("--otlp-traces-endpoint / --collect-detailed-traces: no traces are exported (no OpenTelemetry here)");
  check_vllm_extra_flags(f.extra);
}

}  // namespace vireo
