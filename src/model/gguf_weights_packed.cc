// GGUF linear weights and stacked MoE experts kept in their ggml block type (Q4_0 ... Q6_K) for backends
// whose linear takes them (Backend::supports_packed_linear): the file's bytes, whole rows, so a row's blocks
// never move; only llama's Q/K rows, which the converter interleaved per head, are put back in HF order, and
// ffn_gate_exps / ffn_up_exps interleaved per expert into gate_up.
#include <cstring>

#include "core/error.h"
#include "gguf/gguf_types.h"
#include "model/gguf_weights.h"

namespace vireo {

// Packed: a 2-D linear weight under its own name, or a stacked expert weight [E, rows, cols] (down, or
// gate_up from one ffn_gate_up_exps or from ffn_gate_exps and ffn_up_exps of one type).
std::optional<DType> GgufWeights::packed_dtype(const std::string& name, const std::vector<int64_t>& expected) const {
  auto block = [&](const GgufShards::Found& f, const std::vector<int64_t>& shape) -> std::optional<DType> {
    if (!f.info || f.info->shape() != shape) return std::nullopt;  // read() reports what is wrong
    return ggml_block_dtype(f.info->type);
  };
  if (const std::string l = expert_layer(name, true); !l.empty()) {
    if (expected.size() != 3 || expected[1] % 2 != 0) return std::nullopt;
    const std::string b = "blk." + l + ".";
    if (const GgufShards::Found f = files_->find_tensor(b + "ffn_gate_up_exps.weight"); f.info) return block(f, expected);
    const std::vector<int64_t> half{expected[0], expected[1] / 2, expected[2]};
    const auto g = block(files_->find_tensor(b + "ffn_gate_exps.weight"), half);
    const auto u = block(files_->find_tensor(b + "ffn_up_exps.weight"), half);
    return g && u && *g == *u ? g : std::nullopt;
  }
  const bool down = !expert_layer(name, false).empty();
  if (expected.size() != (down ? 3u : 2u)) return std::nullopt;
  const std::string g = gguf_tensor_name(name, post_attention_norm_);
  if (g.empty()) return std::nullopt;
  return block(files_->find_tensor(g), expected);
}

void GgufWeights::read_packed(const std::string& name, const std::vector<int64_t>& expected, void* dst) const {
  const std::optional<DType> dt = packed_dtype(name, expected);
  if (!dt) throw Error(files_->first().path() + ": the tensor for " + name + " is not stored block-quantized");
  auto* out = static_cast<uint8_t*>(dst);
  const std::string l = expert_layer(name, true);  // "": not a stacked gate_up
  const std::string fused = "blk." + l + ".ffn_gate_up_exps.weight";
  if (!l.empty() && !files_->find_tensor(fused).info) {
    // Expert e's rows: its ffn_gate_exps rows, then its ffn_up_exps rows (whole rows of blocks).
    const int64_t E = expected[0], I = expected[1] / 2;
    const size_t part = dtype_row_bytes(*dt, I * expected[2]);
    const GgufShards::Found g = files_->find_tensor("blk." + l + ".ffn_gate_exps.weight");
    const GgufShards::Found u = files_->find_tensor("blk." + l + ".ffn_up_exps.weight");
    for (int64_t e = 0; e < E; ++e) {
      std::memcpy(out + (2 * e) * part, g.data() + e * part, part);
      std::memcpy(out + (2 * e + 1) * part, u.data() + e * part, part);
    }
    return;
  }
  const GgufShards::Found f = l.empty() ? find(name, expected) : files_->find_tensor(fused);
  const int64_t rows = Tensor(nullptr, DType::kF32, expected).numel() / expected.back();
  const size_t row_bytes = dtype_row_bytes(*dt, expected.back());
  const int heads = permuted_heads(name);
  if (heads == 0) {
    std::memcpy(out, f.data(), row_bytes * rows);
    return;
  }
  unpermute_rows(f.data(), rows, row_bytes, heads, out, f.file->path(), name);
}

std::optional<Tensor> GgufWeights::view_packed(const std::string& name, const std::vector<int64_t>& expected) const {
  const std::optional<DType> dt = packed_dtype(name, expected);
  if (!dt || permuted_heads(name) > 0) return std::nullopt;
  const std::string l = expert_layer(name, true);
  if (l.empty()) return Tensor(const_cast<uint8_t*>(find(name, expected).data()), *dt, expected);
  const GgufShards::Found f = files_->find_tensor("blk." + l + ".ffn_gate_up_exps.weight");
  if (!f.info) return std::nullopt;  // gate and up apart: interleaved by read_packed
  return Tensor(const_cast<uint8_t*>(f.data()), *dt, expected);
}

}  // namespace vireo
