// FP8 checkpoints, as vLLM reads them: linear weights stored F8_E4M3 (or F8_E5M2) beside float scales.
//   - "<name>_scale_inv" [ceil(out / b0), ceil(in / b1)]: block-wise (quantization_config quant_method "fp8"
//     with weight_block_size [b0, b1]: DeepSeek-V3, Qwen3-*-FP8, transformers' FineGrainedFP8);
//   - "<name>_scale": one value (per tensor: vLLM's fp8, compressed-tensors' tensor strategy), [out] or
//     [out, 1] (per channel: compressed-tensors' channel strategy), or blocks as above (block strategy).
// value = fp8 * scale. The weights are dequantized to the model dtype at load; activations are not
// quantized (input_scale is ignored), so results follow the checkpoint's weights, not an FP8 GEMM's rounding.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "model/safetensors.h"

namespace vireo {

struct Fp8Layout {
  int64_t block_rows = 0, block_cols = 0;  // the config's weight block; 0 where it names none
};

// What config.json's quantization_config asks for: nullopt without one (or for GPT-OSS's mxfp4, read by
// its own loader), an Fp8Layout for FP8 checkpoints; throws, naming the method, for the rest (GPTQ, AWQ,
// bitsandbytes, integer compressed-tensors, ...).
std::optional<Fp8Layout> checkpoint_fp8_layout(const nlohmann::json& config, const std::string& source);

// ckpt with its F8 tensors read dequantized (view() gives nullopt for them); other tensors pass through.
std::unique_ptr<WeightSource> with_fp8_dequant(std::unique_ptr<Checkpoint> ckpt, const Fp8Layout& layout);

}  // namespace vireo
