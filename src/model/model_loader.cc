// load_model: config -> architecture spec -> DecoderModel with checkpoint or dummy weights.
// A model path is an HF directory (config.json + safetensors) or a GGUF file.
#include <filesystem>

#include "core/error.h"
#include "core/log.h"
#include "gguf/gguf_file.h"
#include "model/decoder_model.h"
#include "model/fp8_weights.h"
#include "model/gguf_config.h"
#include "model/gguf_weights.h"
#include "model/safetensors.h"

namespace vireo {

DType kv_cache_dtype(const std::string& name, const Backend& backend) {
  const DType act = backend.activation_dtype();
  if (name == "auto" || name.empty()) return act;
  if (name == "fp8" || name == "fp8_e4m3") {
    if (!backend.supports_fp8_kv_cache())
      throw Error("--kv-cache-dtype " + name + ": the " + backend.name() + " backend has no FP8 KV cache (use auto)");
    return DType::kF8E4M3;
  }
  if (name == "bfloat16" || name == "float16" || name == "half" || name == "float32" || name == "float") {
    if (parse_dtype(name) == act) return act;
    throw Error("--kv-cache-dtype " + name + ": the KV cache is kept in the activation dtype (" +
                std::string(dtype_name(act)) + "); use auto, or fp8");
  }
  throw Error("--kv-cache-dtype " + name + ": not supported (auto, fp8, fp8_e4m3)");
}

namespace {

constexpr const char* kFormats = "auto, safetensors, gguf, dummy";

// GGUF by flag, by extension, or by magic (a renamed file still loads).
bool is_gguf_model(const std::string& path, const std::string& load_format) {
  const bool dir = std::filesystem::is_directory(path);
  if (load_format == "gguf" && dir) throw Error("--load-format gguf: '" + path + "' is a directory, not a GGUF file");
  if (load_format == "gguf") return true;
  if (dir) return false;
  return std::filesystem::path(path).extension() == ".gguf" || GgufFile::is_gguf(path);
}

std::unique_ptr<Model> load_gguf_model(const std::string& path, std::unique_ptr<Backend> backend,
                                       const LoadOptions& opts) {
  if (opts.load_format != "auto" && opts.load_format != "gguf" && opts.load_format != "dummy")
    throw Error(path + ": a GGUF file cannot be loaded with --load-format " + opts.load_format);
  if (!std::filesystem::is_regular_file(path)) throw Error(path + ": GGUF file not found");
  if (opts.quantization == "fp8" || opts.quantization == "compressed-tensors")
    throw Error("--quantization " + opts.quantization + ": " + path + " is a GGUF file (use --quantization gguf)");
  auto files = std::make_unique<GgufShards>(path);
  ModelConfig config = gguf_model_config(*files);
  const ArchSpec& spec = find_arch_spec(config.architecture, path);
  std::unique_ptr<WeightSource> weights;
  if (opts.load_format == "dummy") {
    log_info("loading {} ({}) with dummy weights (seed {})", config.architecture, path, opts.seed);
  } else {
    log_info("loading {} from GGUF v{} ({} tensors in {} file(s); quantized weights kept packed where the backend "
             "takes them, else dequantized at load)",
             config.architecture, files->first().version(), files->num_tensors(), files->num_files());
    weights = std::make_unique<GgufWeights>(std::move(files), config);
  }
  return std::make_unique<DecoderModel>(config, spec, std::move(backend), std::move(weights), opts);
}

}  // namespace

std::unique_ptr<Model> load_model(const ModelConfig& config, const std::string& model_dir,
                                  std::unique_ptr<Backend> backend, const LoadOptions& opts) {
  if (!backend) throw Error("load_model: no backend");
  const std::string source =
      model_dir.empty() ? "config" : (std::filesystem::path(model_dir) / "config.json").string();
  const ArchSpec& spec = find_arch_spec(config.architecture, source);
  std::unique_ptr<WeightSource> ckpt;
  // --quantization fp8: the projections in FP8 (online for BF16 or dummy weights, as vLLM);
  // compressed-tensors names a checkpoint format, so it needs FP8 weights in the checkpoint.
  LoadOptions o = opts;
  o.fp8_linears = opts.quantization == "fp8" || opts.quantization == "compressed-tensors";
  if (opts.quantization == "compressed-tensors" && opts.load_format == "dummy")
    throw Error("--quantization compressed-tensors with dummy weights: it names a checkpoint format (use "
                "--quantization fp8 to quantize dummy weights)");
  if (opts.load_format == "dummy") {
    log_info("loading {} with dummy weights (seed {})", config.architecture, opts.seed);
  } else if (opts.load_format == "auto" || opts.load_format == "safetensors") {
    if (model_dir.empty()) throw Error("load_model: no model directory (use --load-format dummy for random weights)");
    const std::optional<Fp8Layout> fp8 = checkpoint_fp8_layout(config.raw, source);
    auto files = std::make_unique<Checkpoint>(model_dir);
    const bool stored_fp8 = files->has_fp8();
    if (opts.quantization == "compressed-tensors" && !stored_fp8)
      throw Error("--quantization compressed-tensors: " + model_dir + " holds no FP8 weights (use --quantization "
                  "fp8 to quantize a BF16 checkpoint at load)");
    if (stored_fp8) {
      log_info("{}: FP8 weights (scales per tensor, per row or per block of {}), dequantized to the model dtype at "
               "load", model_dir,
               fp8 && fp8->block_rows ? std::to_string(fp8->block_rows) + " x " + std::to_string(fp8->block_cols)
                                      : std::string("128 x 128"));
      ckpt = with_fp8_dequant(std::move(files), fp8.value_or(Fp8Layout{}));
    } else {
      ckpt = std::move(files);
    }
    // A wrapper whose text model sits at the top (Qwen2-VL / Qwen2.5-VL as the hub released them: model.*
    // beside visual.*) needs no prefix.
    const bool nested = spec.language_model_prefix && !ckpt->has("model.embed_tokens.weight");
    if (nested) {
      // Qwen3.5's checkpoints hold model.language_model.*; Gemma 3's (the hub's, and what transformers
      // 5.17 saves for it) language_model.model.*.
      const bool v4 = !ckpt->has("model.language_model.embed_tokens.weight") &&
                      ckpt->has("language_model.model.embed_tokens.weight");
      ckpt = with_model_prefix(std::move(ckpt), v4 ? "language_model.model." : "model.language_model.");
    } else if (!ckpt->has("model.embed_tokens.weight") && ckpt->has("embed_tokens.weight")) {
      // Saved from the base model (AutoModel / sentence-transformers: embedding checkpoints): no "model."
      // prefix and, usually, no lm_head.
      log_info("{}: weights without the 'model.' prefix (a base model's layout)", model_dir);
      ckpt = with_model_prefix(std::move(ckpt), "");
    }
  } else if (opts.load_format == "gguf") {
    throw Error("--load-format gguf: '" + model_dir + "' is not a GGUF file");
  } else {
    throw Error(std::string("--load-format: unsupported value '") + opts.load_format + "' (" + kFormats + ")");
  }
  return std::make_unique<DecoderModel>(config, spec, std::move(backend), std::move(ckpt), o);
}

std::unique_ptr<Model> load_model(const std::string& model_path, std::unique_ptr<Backend> backend,
                                  const LoadOptions& opts) {
  if (!backend) throw Error("load_model: no backend");
  if (is_gguf_model(model_path, opts.load_format)) {
    if (!opts.hf_overrides.is_null() && !opts.hf_overrides.empty())
      throw Error("--hf-overrides: not supported for GGUF files (their config comes from the file's metadata)");
    return load_gguf_model(model_path, std::move(backend), opts);
  }
  const std::string cfg = (std::filesystem::path(model_path) / "config.json").string();
  if (!std::filesystem::exists(cfg)) throw Error(cfg + ": model config not found");
  return load_model(ModelConfig::from_file(cfg, opts.hf_overrides), model_path, std::move(backend), opts);
}

}  // namespace vireo
