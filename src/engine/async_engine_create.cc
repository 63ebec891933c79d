// AsyncEngine::create: load tokenizer, chat template, generation config, backend and model,
// size the KV cache, and start the engine.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string_view>
#include <set>

#include "core/error.h"
#include "core/log.h"
#include "engine/async_engine_impl.h"
#include "engine/model_runner.h"
#include "engine/pooling_config.h"
#include "engine/scheduling_policy.h"
#include "model/default_model.h"
#include "model/lora_adapter.h"
#include "template/chat_template_file.h"
#include "tokenizer/default_dir.h"

namespace vireo {

namespace {

bool is_default_model(const std::string& m) { return m.empty() || m == "default"; }
constexpr std::string_view kBuiltinPrefix = "builtin:";
bool is_builtin_model(const std::string& m) { return is_default_model(m) || m.rfind(kBuiltinPrefix, 0) == 0; }
std::string builtin_name(const std::string& m) {
  return is_default_model(m) ? "default" : m.substr(kBuiltinPrefix.size());
}

std::unique_ptr<Backend> create_engine_backend(const EngineConfig& cfg) {
  const char* env = std::getenv("VIREO_BATCH_INVARIANT");
  const bool batch_invariant = cfg.batch_invariant || (env != nullptr && std::string_view(env) == "1");
  auto backend = create_backend(cfg.device, cfg.dtype, batch_invariant);
  if (backend->batch_invariant())
    log_info("batch-invariant mode: on (fixed-order GEMM for every linear, one attention shape without key "
             "splits, fixed sampling chunks: each row's result is independent of its batch; slower than the "
             "default kernels)");
  return backend;
}

// LoadOptions::dequantize_mxfp4 from VIREO_MXFP4 (unset or packed: MXFP4 experts stay packed where the backend
// takes them; dequantize: expanded at load) and --quantization (mxfp4 asks for the packed form).
bool dequantize_mxfp4(const EngineConfig& cfg) {
  const char* env = std::getenv("VIREO_MXFP4");
  const std::string v = env ? env : "";
  if (!v.empty() && v != "packed" && v != "dequantize")
    throw Error("VIREO_MXFP4=" + v + ": expected packed or dequantize");
  if (v == "dequantize" && cfg.quantization == "mxfp4")
    throw Error("--quantization mxfp4 keeps MXFP4 experts packed, VIREO_MXFP4=dequantize dequantizes them: pick one");
  return v == "dequantize";
}

// LoadOptions::dequantize_gguf from VIREO_GGUF (unset or packed: GGUF block-quantized linear weights stay
// packed where the backend's linear takes them; dequantize: expanded at load, for A/B runs).
bool dequantize_gguf() {
  const char* env = std::getenv("VIREO_GGUF");
  const std::string v = env ? env : "";
  if (!v.empty() && v != "packed" && v != "dequantize") throw Error("VIREO_GGUF=" + v + ": expected packed or dequantize");
  return v == "dequantize";
}

// LoadOptions::dummy_block_dtype from VIREO_DUMMY_QUANT (Q4_0 ... Q6_K; unset: none).
DType dummy_block_dtype() {
  const char* env = std::getenv("VIREO_DUMMY_QUANT");
  if (!env || !*env) return DType::kF32;
  for (DType t : {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ8_0, DType::kQ2_K, DType::kQ3_K,
                  DType::kQ4_K, DType::kQ5_K, DType::kQ6_K})
    if (dtype_name(t) == env) return t;
  throw Error(std::string("VIREO_DUMMY_QUANT=") + env + ": expected one of Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K Q4_K Q5_K Q6_K");
}

// cfg.max_num_seqs is resolved (> 0); `state_slots`: the recurrent-state slots a hybrid model allocates.
std::unique_ptr<Model> load_engine_model(const EngineConfig& cfg, std::unique_ptr<Backend> backend, int state_slots) {
  LoadOptions opts;
  opts.load_format = cfg.load_format;
  opts.seed = cfg.seed;
  opts.dtype = cfg.dtype;
  // CUDA graphs for decode-only steps up to max_num_seqs rows, at most 512 (vLLM's capture sizes).
  opts.enforce_eager = cfg.enforce_eager;
  opts.max_graph_batch_size = std::min(cfg.max_num_seqs, kMaxGraphBatchSize);
  if (cfg.max_cuda_graph_size > 0) opts.max_graph_batch_size = std::min(cfg.max_cuda_graph_size, kMaxGraphBatchSize);
  opts.max_num_seqs = state_slots;
  opts.max_model_len = std::max(0, cfg.max_model_len);  // auto (-1): the model's, the widest it can be
  opts.dequantize_mxfp4 = dequantize_mxfp4(cfg);
  opts.dequantize_gguf = dequantize_gguf();
  opts.dummy_block_dtype = dummy_block_dtype();
  opts.pooling = cfg.pooling.enabled;
  opts.quantization = cfg.quantization;
  opts.kv_cache_dtype = cfg.kv_cache_dtype;
  const std::string& q = cfg.quantization;
  if (!q.empty() && q != "gguf" && q != "mxfp4" && q != "fp8" && q != "compressed-tensors")
    throw Error("--quantization " + q + ": not supported (gguf, mxfp4, fp8 or compressed-tensors)");
  if (!cfg.hf_overrides.empty()) {
    opts.hf_overrides = nlohmann::json::parse(cfg.hf_overrides, nullptr, /*allow_exceptions=*/false);
    if (!opts.hf_overrides.is_object())
      throw Error("--hf-overrides: must be a JSON object, e.g. '{\"max_position_embeddings\": 65536}'");
  }
  if (is_builtin_model(cfg.model)) {
    // Built-in shapes have no checkpoint: dummy (seeded random) weights.
    opts.load_format = "dummy";
    ModelConfig c = builtin_model_config(builtin_name(cfg.model));
    if (!opts.hf_overrides.is_null())
      c = ModelConfig::from_json(ModelConfig::with_overrides(c.raw, opts.hf_overrides), cfg.model + " with --hf-overrides");
    return load_model(c, "", std::move(backend), opts);
  }
  return load_model(cfg.model, std::move(backend), opts);
}

std::string tokenizer_dir(const EngineConfig& cfg) {
  if (!cfg.tokenizer.empty()) return cfg.tokenizer;
  if (!is_builtin_model(cfg.model)) return cfg.model;
  // Built-in models use the tokenizer of their family, fetched into models/ by setup.sh.
  std::filesystem::path dir = default_tokenizer_dir();  // .../models/qwen3
  if (builtin_name(cfg.model).rfind("llama3", 0) == 0) dir = dir.parent_path() / "llama3";
  // Gemma 2 and 3: Gemma 3's tokenizer, the Gemma one npm ships (a real Gemma 2 checkpoint brings its own).
  if (builtin_name(cfg.model).rfind("gemma", 0) == 0) dir = dir.parent_path() / "gemma3";
  if (builtin_name(cfg.model).rfind("gpt-oss", 0) == 0) dir = dir.parent_path() / "gptoss";
  return dir.string();
}

GenerationConfig base_generation_config(const EngineConfig& cfg) {
  if (cfg.generation_config == "vllm") return {};
  if (cfg.generation_config == "auto") {
    if (is_builtin_model(cfg.model)) return {};
    return GenerationConfig::from_dir(cfg.model);
  }
  if (!std::filesystem::is_directory(cfg.generation_config))
    throw Error("--generation-config: '" + cfg.generation_config + "' is not auto, vllm or a folder");
  return GenerationConfig::from_dir(cfg.generation_config);
}

// --generation-config's defaults, then --override-generation-config's (vLLM: merged over auto's or a
// folder's, alone with vllm).
GenerationConfig load_generation_config(const EngineConfig& cfg) {
  GenerationConfig g = base_generation_config(cfg);
  if (cfg.override_generation_config.empty()) return g;
  const auto j = nlohmann::json::parse(cfg.override_generation_config, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object())
    throw Error("--override-generation-config: expected a JSON object, e.g. '{\"temperature\": 0.5}'");
  g.apply_json(j, "--override-generation-config");
  return g;
}

// --lora-modules: read each adapter and put it on the model, ids 1, 2, ... in order.
void add_startup_loras(EngineParts& parts) {
  const EngineConfig& c = parts.config;
  if (!c.enable_lora) {
    if (!c.lora_modules.empty()) throw Error("--lora-modules needs --enable-lora");
    return;
  }
  if (c.max_loras < 1) throw Error("--max-loras must be at least 1");
  if (c.max_lora_rank < 1) throw Error("--max-lora-rank must be at least 1");
  std::set<std::string> names;
  for (const auto& m : c.lora_modules) {
    if (m.name.empty() || m.path.empty()) throw Error("--lora-modules: expected name=path, got '" + m.name + "=" + m.path + "'");
    if (!names.insert(m.name).second) throw Error("--lora-modules: the name '" + m.name + "' is given twice");
    const int32_t id = static_cast<int32_t>(parts.loras.size()) + 1;
    parts.model->add_lora(id, load_lora_adapter(m.path, c.max_lora_rank));
    parts.loras.push_back({m.name, m.path, id});
  }
  log_info("LoRA: {} adapter(s) loaded, --max-loras {}, --max-lora-rank {}", parts.loras.size(), c.max_loras,
           c.max_lora_rank);
}

}  // namespace

int default_max_num_seqs(size_t device_memory_bytes) {
  // vLLM (EngineArgs.get_batch_defaults, API server): 1024 on GPUs of >= 70 GiB, 256 elsewhere. Past 256
  // running requests a decode step is bound by reading their KV cache, so more sequences add little
  // throughput; what they change is that clients beyond 256 run instead of queueing (TTFT).
  return device_memory_bytes >= (size_t{70} << 30) ? 1024 : 256;
}

int default_max_num_batched_tokens(size_t device_memory_bytes) {
  // vLLM (EngineArgs.get_batch_defaults, API server): 8192 on GPUs of >= 70 GiB, 2048 elsewhere. On the
  // H200 8192 measured +2% output tok/s and a 4x lower median TTFT than 2048 at 256 concurrent requests
  // (docs/performance.md, session 12), for a ~10% longer TPOT.
  return device_memory_bytes >= (size_t{70} << 30) ? 8192 : 2048;
}

std::unique_ptr<AsyncEngine> AsyncEngine::create(const EngineConfig& config) {
  EngineParts parts;
  parts.config = config;
  if (parts.config.block_size <= 0) throw Error("--block-size must be positive");
  if (parts.config.max_num_seqs < 0) throw Error("--max-num-seqs must be positive (0: auto)");
  if (parts.config.max_num_batched_tokens < 0) throw Error("--max-num-batched-tokens must be positive (0: auto)");
  parse_scheduling_policy(parts.config.scheduling_policy);  // before the load: a typo fails at once

  parts.tokenizer = Tokenizer::from_dir(tokenizer_dir(config));
  const Tokenizer& tok = *parts.tokenizer;
  if (!config.chat_template.empty()) {  // the user's template must compile: an error, not a warning
    parts.chat_template = std::make_unique<ChatTemplate>(load_chat_template(config.chat_template),
                                                         tok.bos_token().value_or(""), tok.eos_token().value_or(""));
  } else if (!tok.chat_template().empty()) {
    try {
      parts.chat_template = std::make_unique<ChatTemplate>(tok.chat_template(), tok.bos_token().value_or(""),
                                                           tok.eos_token().value_or(""));
    } catch (const Error& e) {
      log_warn("chat template ignored: {}", e.what());
    }
  }
  parts.generation_config = load_generation_config(config);
  parts.config.pooling = resolve_pooling(parts.config.runner, parts.config.pooler_config, config.model,
                                        config.hf_overrides, [&](const std::string& t) { return tok.token_to_id(t); });
  if (parts.config.pooling.enabled && parts.config.enable_lora) throw Error("--enable-lora is for --runner generate");
  if (parts.config.pooling.enabled) {
    static const char* const kTypes[] = {"LAST", "MEAN", "CLS"};
    const PoolingSpec& p = parts.config.pooling;
    if (p.classifies())
      log_info("pooling runner: a sequence classifier ({} labels, {} pooling), serving /classify, /score, /rerank",
               p.labels.size(), kTypes[static_cast<int>(p.type)]);
    else
      log_info("pooling runner: {} pooling{}, serving /v1/embeddings", kTypes[static_cast<int>(p.type)],
               p.normalize ? ", normalised" : "");
  }
  parts.speculative = SpeculativeConfig::parse(parts.config.speculative_config);  // bad JSON fails before loading
  if (parts.speculative.enabled() && parts.config.pooling.enabled)
    throw Error("--speculative-config is for --runner generate");
  auto backend = create_engine_backend(config);
  const bool auto_seqs = parts.config.max_num_seqs == 0;
  if (auto_seqs) parts.config.max_num_seqs = default_max_num_seqs(backend->total_memory_bytes());
  const int state_slots = auto_seqs ? std::min(parts.config.max_num_seqs, kAutoStateSlots) : parts.config.max_num_seqs;
  parts.model = load_engine_model(parts.config, std::move(backend), state_slots);
  if (auto_seqs && parts.model->num_state_slots() > 0)
    parts.config.max_num_seqs = std::min(parts.config.max_num_seqs, parts.model->num_state_slots());
  const ModelConfig& mc = parts.model->config();
  int derived_len = mc.max_position_embeddings > 0 ? mc.max_position_embeddings : 2048;
  if (mc.sliding_window > 0) {
    int n = 0;
    for (uint8_t x : mc.sliding_layers) n += x != 0;
    log_info("sliding-window attention: window {} on {} of {} layers", mc.sliding_window, n, mc.num_hidden_layers);
  }
  if (config.max_model_len > 0) {
    if (config.max_model_len > derived_len)
      log_warn("--max-model-len {} exceeds the model's max_position_embeddings {}", config.max_model_len, derived_len);
    parts.max_model_len = config.max_model_len;
  } else {
    parts.max_model_len = derived_len;
  }

  std::set<int32_t> eos(mc.eos_token_ids.begin(), mc.eos_token_ids.end());
  eos.insert(parts.generation_config.eos_token_ids.begin(), parts.generation_config.eos_token_ids.end());
  if (auto id = tok.eos_token_id()) eos.insert(*id);
  parts.eos_token_ids.assign(eos.begin(), eos.end());

  add_startup_loras(parts);
  if (const PoolingSpec& p = parts.config.pooling;
      p.classifies() && p.classifier.size() != p.labels.size() * static_cast<size_t>(mc.hidden_size))
    throw Error(config.model + ": score.weight is not [num_labels, hidden_size " + std::to_string(mc.hidden_size) + "]");

  if (parts.config.max_num_batched_tokens <= 0)
    parts.config.max_num_batched_tokens = default_max_num_batched_tokens(parts.model->backend().total_memory_bytes());
  if (parts.config.max_num_batched_tokens < parts.config.max_num_seqs)
    parts.config.max_num_batched_tokens = parts.config.max_num_seqs;
  parts.num_kv_blocks = compute_num_kv_blocks(parts.config, *parts.model, parts.max_model_len);
  const long kv_tokens = static_cast<long>(parts.num_kv_blocks - 1) * parts.config.block_size;
  const double gib = 1024.0 * 1024.0 * 1024.0;
  const size_t block_bytes = parts.model->kv_block_bytes(parts.config.block_size);
  if (kv_tokens < parts.max_model_len) {
    // --max-model-len auto / -1 (vLLM): the longest context the KV cache holds, when that is shorter than the
    // model's own.
    if (config.max_model_len < 0 && kv_tokens > 0) {
      log_warn("--max-model-len auto: the KV cache holds {} tokens, fewer than the model's {}; max_model_len is {}",
               kv_tokens, parts.max_model_len, kv_tokens);
      parts.max_model_len = static_cast<int>(kv_tokens);
    } else {
      throw Error(fmt::format(
          "To serve at least one request with the model's max seq len ({}), {:.2f} GiB KV cache is needed, which is "
          "larger than the available KV cache memory ({:.2f} GiB). Based on the available memory, the estimated "
          "maximum model length is {}. Try increasing --gpu-memory-utilization or --kv-cache-memory-bytes, or "
          "decreasing --max-model-len (auto: the longest that fits).",
          parts.max_model_len,
          static_cast<double>((parts.max_model_len + parts.config.block_size - 1) / parts.config.block_size) *
              block_bytes / gib,
          static_cast<double>(parts.num_kv_blocks - 1) * block_bytes / gib, std::max(0L, kv_tokens)));
    }
  }
  log_info("KV cache: {} tokens ({} blocks of {}, {:.2f} GiB, {}); maximum concurrency for {} tokens per request: "
           "{:.2f}x",
           kv_tokens, parts.num_kv_blocks - 1, parts.config.block_size,
           static_cast<double>(parts.num_kv_blocks - 1) * block_bytes / gib,
           dtype_name(kv_cache_dtype(parts.config.kv_cache_dtype, parts.model->backend())), parts.max_model_len,
           static_cast<double>(kv_tokens) / parts.max_model_len);
  if (parts.config.async_scheduling < 0)
    parts.config.async_scheduling = parts.model->backend().kind() == DeviceKind::kCPU ? 0 : 1;
  if (const SpeculativeConfig& spec = parts.speculative; spec.enabled()) {
    log_info("speculative decoding: n-gram drafts, up to {} a step (prompt lookup {}..{} tokens{}); async scheduling "
             "off",
             spec.num_speculative_tokens, spec.prompt_lookup_min, spec.prompt_lookup_max,
             spec.disable_by_batch_size ? ", none from " + std::to_string(spec.disable_by_batch_size) + " running requests"
                                        : std::string());
    parts.config.async_scheduling = 0;
  }
  log_info("Scheduler: max_num_seqs {}, max_num_batched_tokens {}{}, async scheduling {}, policy {}",
           parts.config.max_num_seqs, parts.config.max_num_batched_tokens,
           config.max_num_seqs == 0 ? " (max_num_seqs auto)" : "", parts.config.async_scheduling ? "on" : "off",
           parts.config.scheduling_policy);
  return std::make_unique<AsyncEngineImpl>(std::move(parts));
}

}  // namespace vireo
