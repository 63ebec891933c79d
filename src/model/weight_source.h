// Where a model's weights come from, by HF tensor name ("model.layers.0.self_attn.q_proj.weight"):
// a safetensors checkpoint (views into the mmapped files) or a GGUF file (renamed, dequantized).
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace vireo {

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  virtual bool has(const std::string& name) const = 0;
  // A host view of the tensor as stored (F32/F16/BF16), valid while the source lives, so the CPU
  // backend can use mmapped weights in place; nullopt when it must be converted first (then read()).
  // Errors name the file and the tensor (missing, wrong shape, unsupported type).
  virtual std::optional<Tensor> view(const std::string& name, const std::vector<int64_t>& expected) const = 0;
  // The stored shape of `name` where the source can tell (safetensors), for tensors whose layout varies
  // between writers (Qwen3-VL-MoE's stacked experts); nullopt otherwise.
  virtual std::optional<std::vector<int64_t>> shape(const std::string& name) const {
    (void)name;
    return std::nullopt;
  }
  // Writes the tensor, converted to `dtype` (F32/F16/BF16), to dst (numel * dtype_size bytes).
  virtual void read(const std::string& name, const std::vector<int64_t>& expected, DType dtype, void* dst) const = 0;
  // Zero-centred RMSNorm weights (Gemma's norm(x) * (1 + w)) are stored as 1 + w already (llama.cpp's
  // converter adds the 1), so the loader must not add it again.
  virtual bool norms_include_one() const { return false; }
  // GPT-OSS's stacked experts come as mlp.experts.gate_up_proj [E, 2I, hidden] = [gate; up] rows per
  // expert, down_proj [E, hidden, I] and gate_up_proj_bias [E, 2I] = [gate | up] (GGUF files), not as the
  // checkpoint's [E, in, out] with gate / up interleaved.
  virtual bool experts_as_rows() const { return false; }
  // Whether `name` is stored in MXFP4 and can come packed through read_mxfp4 (GGUF's MXFP4 experts, under
  // the names experts_as_rows gives); read() dequantizes it either way.
  virtual bool stored_as_mxfp4(const std::string& name) const {
    (void)name;
    return false;
  }
  // `name` ([..., cols] as `expected`, cols a multiple of 32) as MXFP4 in MoeParams' layout: blocks
  // [..., cols / 2] (byte j of a row: element 2j in the low nibble, 2j + 1 in the high one) and E8M0
  // scales [..., cols / 32] (value = fp4 * 2^(s - 127)). Only where stored_as_mxfp4(name).
  virtual void read_mxfp4(const std::string& name, const std::vector<int64_t>& expected, uint8_t* blocks,
                          uint8_t* scales) const;
  // The block type (DType kQ4_0 ... kQ6_K) `name` is stored in where it can come packed through
  // read_packed: one tensor of the file, [rows, cols] as `expected`; nullopt otherwise (read() dequantizes).
  virtual std::optional<DType> packed_dtype(const std::string& name, const std::vector<int64_t>& expected) const {
    (void)name, (void)expected;
    return std::nullopt;
  }
  // Its blocks as stored, rows in HF order: Tensor(expected, packed_dtype).nbytes() bytes at dst.
  virtual void read_packed(const std::string& name, const std::vector<int64_t>& expected, void* dst) const;
  // A host view of those blocks where no row moves (the CPU keeps them mmapped in place); nullopt otherwise.
  virtual std::optional<Tensor> view_packed(const std::string& name, const std::vector<int64_t>& expected) const {
    (void)name, (void)expected;
    return std::nullopt;
  }
};

// Serves every "model.X" name from inner's "<prefix>X" (the multimodal wrappers keep the text model
// under model.language_model.*); other names (lm_head.weight) pass through (prefixed_weights.cc).
std::unique_ptr<WeightSource> with_model_prefix(std::unique_ptr<WeightSource> inner, const std::string& prefix);

// n floats to `dtype` (F32/F16/BF16, round to nearest even) at dst.
void store_f32_as(const float* src, int64_t n, DType dtype, void* dst);
// A host F32/F16/BF16 tensor converted to `dtype` at dst.
void store_as(const Tensor& src, DType dtype, void* dst);

}  // namespace vireo
