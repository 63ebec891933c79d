// Engine settings; the CLI maps vLLM's flag names onto these fields one to one.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace vireo {

// How a pooling model turns a prompt's final hidden states into one embedding (vLLM's PoolerConfig).
struct PoolingSpec {
  enum class Type { kLast, kMean, kCls };
  bool enabled = false;
  Type type = Type::kLast;
  bool normalize = true;  // L2-normalised, as vLLM's embed task
  // Sequence classification (*ForSequenceClassification: reward models, cross-encoder rerankers): the
  // checkpoint's score.weight [num_labels, hidden] applied to the pooled state; the output is then the
  // num_labels logits (no normalisation), served by /classify and, with one label, /score and /rerank.
  std::vector<float> classifier;     // [num_labels, hidden]; empty: an embedding model
  std::vector<std::string> labels;   // id2label, num_labels entries
  bool classifies() const { return !classifier.empty(); }
  // Matryoshka embeddings (config.json's is_matryoshka / matryoshka_dimensions, e.g. via --hf-overrides for
  // Qwen3-Embedding): a request's `dimensions` keeps the first N values, renormalised. Empty dims: any N.
  bool matryoshka = false;
  std::vector<int> matryoshka_dims;
};

struct EngineConfig {
  std::string model;                 // HF directory or .gguf file; "" = the built-in default model
  std::string tokenizer;             // "" = same as model
  std::string load_format = "auto";  // auto | safetensors | gguf | dummy
  std::string dtype = "auto";
  // vLLM's --quantization (`vireo serve`): "" (the checkpoint's own), gguf, mxfp4 (GPT-OSS's MXFP4 experts
  // kept packed), fp8 / compressed-tensors (an FP8 checkpoint; LoadOptions::quantization).
  std::string quantization;
  // vLLM's --kv-cache-dtype: auto (the activation dtype) | fp8 / fp8_e4m3 (E4M3 codes, scale 1 as vLLM's
  // default without checkpoint scales: half the bytes of a BF16 cache, so twice the tokens and half the
  // decode attention's reads).
  std::string kv_cache_dtype = "auto";
  std::string device = "auto";       // auto | cpu | cuda
  uint64_t seed = 0;
  int max_model_len = 0;             // 0 = from config (max_position_embeddings); -1 = auto: that, or the longest the KV cache holds
  // 0 = auto, vLLM's API-server default for the device: 1024 on a GPU with >= 70 GiB (H100, H200), else
  // 256; at most kAutoStateSlots for models with per-sequence recurrent state (AsyncEngine::create
  // resolves it; config() then holds the number).
  int max_num_seqs = 0;
  // 0 = auto, vLLM's API-server default for the device: 8192 on a GPU with >= 70 GiB (H100, H200),
  // else 2048 (AsyncEngine::create resolves it; config() then holds the number).
  int max_num_batched_tokens = 0;
  int block_size = 16;
  bool enable_prefix_caching = true;
  // vLLM's --scheduling-policy: fcfs | priority (engine/scheduling_policy.h). Requests may set a non-zero
  // priority only with priority.
  std::string scheduling_policy = "fcfs";
  std::optional<size_t> kv_cache_memory_bytes;
  // vLLM's --num-gpu-blocks-override: exactly this many KV blocks, whatever the memory sizing says (tests of
  // preemption, reproducible capacity); wins over kv_cache_memory_bytes.
  std::optional<int> num_gpu_blocks_override;
  double gpu_memory_utilization = 0.9;
  std::string generation_config = "auto";  // auto | vllm | a folder
  // vLLM's --override-generation-config: a JSON object of sampling defaults (temperature, top_p, top_k,
  // min_p, repetition_penalty) over --generation-config's ("" = none).
  std::string override_generation_config;
  // vLLM's --cuda-graph-sizes: decode graphs are captured up to this batch size (the largest size given);
  // 0 = auto (max_num_seqs, at most kMaxGraphBatchSize).
  int max_cuda_graph_size = 0;
  // vLLM --hf-overrides: a JSON object merged into the model's config.json before it is parsed
  // (ModelConfig::with_overrides); "" = none. E.g. '{"rope_scaling": {...}, "max_position_embeddings": 131072}'.
  std::string hf_overrides;
  bool enforce_eager = false;
  // --async-scheduling / --no-async-scheduling (vLLM's flags): decode steps issued one step ahead of their
  // inputs (EngineCoreConfig::async_scheduling). -1 = auto: on for a GPU backend (where the host's work
  // between steps otherwise leaves the GPU idle: +15% output tok/s serving the Qwen3-0.6B shape at 256
  // clients on the H200), off on the CPU, whose steps run synchronously inside the launch.
  int async_scheduling = -1;
  // vLLM's --speculative-config (JSON; "" = off): n-gram drafts (engine/speculative_config.h). Turns
  // async scheduling off.
  std::string speculative_config;
  // --batch-invariant (or VIREO_BATCH_INVARIANT=1): each row's logits independent of the batch it runs in
  // and of prefill vs decode (Backend::batch_invariant); slower kernels, CUDA only.
  bool batch_invariant = false;
  std::string served_model_name;     // "" = model path
  // --chat-template: a Jinja file, or the template itself (vLLM's rule: text that cannot be opened
  // and holds '{', '}' or a newline is the template); "" = the tokenizer's chat_template.
  std::string chat_template;
  // LoRA adapters (vLLM's --enable-lora, --lora-modules, --max-loras, --max-lora-rank): served under their
  // names beside the base model, loaded at start-up (and at run time through /v1/load_lora_adapter when
  // VLLM_ALLOW_RUNTIME_LORA_UPDATING is set).
  struct LoraModuleSpec {
    std::string name, path;
  };
  bool enable_lora = false;
  std::vector<LoraModuleSpec> lora_modules;
  int max_loras = 1;       // distinct adapters among the running requests
  int max_lora_rank = 16;  // adapters of a larger rank are refused
  // vLLM's --runner (generate | pooling; auto: pooling for a base model's architecture ("Qwen2Model"), a
  // *ForSequenceClassification one or a GGUF with a pooling_type, else generate) / --convert embed / --task
  // embed: pooling serves
  // /v1/embeddings instead of generation. --pooler-config: {"pooling_type": "LAST" | "MEAN" | "CLS",
  // "normalize": bool}; unset: the model folder's sentence-transformers Pooling config, else LAST, normalised.
  std::string runner = "auto";
  std::string pooler_config;
  PoolingSpec pooling;  // resolved by AsyncEngine::create
};

// The auto value of EngineConfig::max_num_batched_tokens on a device of this much memory (0: the CPU).
int default_max_num_batched_tokens(size_t device_memory_bytes);
// The auto value of EngineConfig::max_num_seqs on a device of this much memory (0: the CPU).
int default_max_num_seqs(size_t device_memory_bytes);
// Auto max_num_seqs for models that hold a recurrent-state slot per sequence (Gated DeltaNet: tens of
// MB a slot), allocated at load.
inline constexpr int kAutoStateSlots = 256;
// The largest decode batch captured as a CUDA graph (vLLM's max_cudagraph_capture_size default);
// larger decode steps run eagerly.
inline constexpr int kMaxGraphBatchSize = 512;

}  // namespace vireo
