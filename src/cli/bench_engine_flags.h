// Engine flags shared by `vireo bench latency` and `vireo bench throughput` (vLLM's names).
#pragma once
#include <CLI/CLI.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "cli/human_int.h"
#include "engine/compilation_config.h"
#include "engine/engine_config.h"

namespace vireo {

// --async-scheduling / --no-async-scheduling (vLLM's pair); neither: auto (EngineConfig::async_scheduling).
inline void add_async_scheduling_flags(CLI::App& app, int& value) {
  app.add_flag_callback("--async-scheduling", [&value] { value = 1; },
                        "Issue each decode step before the previous one's tokens are back on the host (its tokens "
                        "are taken on the device); default: on for CUDA, off for the CPU");
  app.add_flag_callback("--no-async-scheduling", [&value] { value = 0; }, "Turn async scheduling off");
}

// vLLM's --cuda-graph-sizes: the decode graphs' largest batch is the largest size given
// (EngineConfig::max_cuda_graph_size; vireo picks the sizes below it, as vLLM's one-value form does).
inline void add_cuda_graph_sizes_flag(CLI::App& app, EngineConfig& c) {
  app.add_option_function<std::vector<int>>(
         "--cuda-graph-sizes",
         [&c](const std::vector<int>& sizes) {
           int m = 0;
           for (int s : sizes) m = std::max(m, s);
           c.max_cuda_graph_size = m;
         },
         "Decode graphs up to the largest size given (1, 2, 4, 8, 16, 24, ... below it); default: --max-num-seqs, "
         "at most 512")
      ->expected(1, -1);
}

// vLLM's --override-generation-config (EngineConfig::override_generation_config).
inline void add_override_generation_config_flag(CLI::App& app, EngineConfig& c) {
  app.add_option("--override-generation-config", c.override_generation_config,
                 "JSON sampling defaults over --generation-config's, e.g. '{\"temperature\": 0.5}' (temperature, "
                 "top_p, top_k, min_p, repetition_penalty, eos_token_id)");
}

// vLLM's --speculative-config (EngineConfig::speculative_config).
inline void add_speculative_flag(CLI::App& app, std::string& value) {
  app.add_option("--speculative-config", value,
                 "Speculative decoding, as JSON: n-gram (prompt lookup) drafts only, e.g. '{\"method\": \"ngram\", "
                 "\"num_speculative_tokens\": 4, \"prompt_lookup_max\": 4, \"prompt_lookup_min\": 2}' "
                 "(optional \"disable_by_batch_size\"); turns async scheduling off");
}

inline void add_bench_engine_flags(CLI::App& app, EngineConfig& c, std::shared_ptr<size_t> kv_bytes) {
  c.runner = "generate";  // the offline benchmarks generate
  app.add_option("--model", c.model, "HF model folder or .gguf file (\"\" = the built-in default model)");
  app.add_option("--tokenizer", c.tokenizer, "Tokenizer folder (default: the model's)");
  app.add_option("--load-format", c.load_format, "auto | safetensors | gguf | dummy")->capture_default_str();
  app.add_option("--device", c.device, "auto | cpu | cuda")->capture_default_str();
  app.add_option("--dtype", c.dtype, "auto | float32 | bfloat16 | float16")->capture_default_str();
  app.add_option("--seed", c.seed)->capture_default_str();
  app.add_option("--quantization,-q", c.quantization,
                 "fp8: the layers' projections in FP8 E4M3 (per-row scales, quantized at load; vLLM's online FP8); "
                 "mxfp4 / gguf / compressed-tensors as `vireo serve --help` says");
  app.add_option("--kv-cache-dtype", c.kv_cache_dtype, "auto | fp8 (K and V as FP8 E4M3, scale 1)")
      ->capture_default_str();
  app.add_option("--hf-overrides", c.hf_overrides, "JSON object merged into the model's config.json (vLLM's flag)");
  app.add_option("--max-model-len", c.max_model_len)->transform(human_int_transform())->capture_default_str();
  app.add_option("--max-num-seqs", c.max_num_seqs,
                 "Most sequences per step (default 0 = auto: 1024 on a GPU with >= 70 GiB, else 256, as vLLM serve; "
                 "at most 256 for models with recurrent state)");
  app.add_option("--max-num-batched-tokens", c.max_num_batched_tokens,
                 "Token budget per step (default 0 = auto: 8192 on a GPU with >= 70 GiB, else 2048, as vLLM serve)");
  app.add_option("--kv-cache-memory-bytes", *kv_bytes, "KV cache size in bytes (default: from memory utilization)");
  app.add_option("--gpu-memory-utilization", c.gpu_memory_utilization)->capture_default_str();
  app.add_flag("--enforce-eager", c.enforce_eager, "No CUDA graphs");
  add_cuda_graph_sizes_flag(app, c);
  app.add_option_function<std::string>(
      "--compilation-config,-O", [&c](const std::string& v) { apply_compilation_config(v, c); },
      "vLLM's flag, its CUDA-graph settings (-O0 or {\"cudagraph_mode\": \"NONE\"}: no graphs; "
      "max_cudagraph_capture_size / cudagraph_capture_sizes: a cap); the rest has no effect");
  app.add_option_function<int>(
         "--max-cudagraph-capture-size",
         [&c](int m) { apply_compilation_config("{\"max_cudagraph_capture_size\": " + std::to_string(m) + "}", c); },
         "The largest decode batch captured as a CUDA graph (as -O.max_cudagraph_capture_size)")
      ->check(CLI::Range(0, 1 << 20));
  add_async_scheduling_flags(app, c.async_scheduling);
  add_speculative_flag(app, c.speculative_config);
  app.add_flag("--batch-invariant", c.batch_invariant,
               "Batch-invariant kernels: a request's output does not depend on what it is batched with "
               "(also VIREO_BATCH_INVARIANT=1; CUDA only, slower)");
  app.add_flag("--enable-prefix-caching,!--no-enable-prefix-caching", c.enable_prefix_caching)
      ->capture_default_str();
}

}  // namespace vireo
