// load_model: config -> architecture spec -> DecoderModel with checkpoint or dummy weights.
#include <filesystem>

#include "core/error.h"
#include "core/log.h"
#include "model/decoder_model.h"

namespace vireo {

std::unique_ptr<Model> load_model(const ModelConfig& config, const std::string& model_dir,
                                  std::unique_ptr<Backend> backend, const LoadOptions& opts) {
  if (!backend) throw Error("load_model: no backend");
  const std::string source =
      model_dir.empty() ? "config" : (std::filesystem::path(model_dir) / "config.json").string();
  const ArchSpec& spec = find_arch_spec(config.architecture, source);
  std::unique_ptr<Checkpoint> ckpt;
  if (opts.load_format == "dummy") {
    log_info("loading {} with dummy weights (seed {})", config.architecture, opts.seed);
  } else if (opts.load_format == "auto" || opts.load_format == "safetensors") {
    if (model_dir.empty()) throw Error("load_model: no model directory (use --load-format dummy for random weights)");
    ckpt = std::make_unique<Checkpoint>(model_dir);
  } else {
    throw Error("--load-format: unsupported value '" + opts.load_format + "' (auto, safetensors, dummy)");
  }
  return std::make_unique<DecoderModel>(config, spec, std::move(backend), std::move(ckpt), opts);
}

std::unique_ptr<Model> load_model(const std::string& model_dir, std::unique_ptr<Backend> backend,
                                  const LoadOptions& opts) {
  const std::string cfg = (std::filesystem::path(model_dir) / "config.json").string();
  if (!std::filesystem::exists(cfg)) throw Error(cfg + ": model config not found");
  return load_model(ModelConfig::from_file(cfg), model_dir, std::move(backend), opts);
}

}  // namespace vireo
