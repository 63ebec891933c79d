// GGUF linear weights kept in their ggml block type (Q4_0 ... Q6_K) for backends whose linear takes them
// (Backend::supports_packed_linear): the file's bytes, whole rows, so a row's blocks never move; only
// llama's Q/K rows, which the converter interleaved per head, are put back in HF order.
#include <cstring>

#include "core/error.h"
#include "gguf/gguf_types.h"
#include "model/gguf_weights.h"

namespace vireo {

std::optional<DType> GgufWeights::packed_dtype(const std::string& name, const std::vector<int64_t>& expected) const {
  const std::string g = gguf_tensor_name(name, post_attention_norm_);
  if (g.empty() || expected.size() != 2) return std::nullopt;
  const GgufShards::Found f = files_->find_tensor(g);
  if (!f.info || f.info->shape() != expected) return std::nullopt;  // read() reports what is wrong
  return ggml_block_dtype(f.info->type);
}

void GgufWeights::read_packed(const std::string& name, const std::vector<int64_t>& expected, void* dst) const {
  const std::optional<DType> dt = packed_dtype(name, expected);
  if (!dt) throw Error(files_->first().path() + ": the tensor for " + name + " is not a block-quantized matrix");
  const GgufShards::Found f = find(name, expected);
  const int64_t rows = expected[0];
  const size_t row_bytes = dtype_row_bytes(*dt, expected[1]);
  auto* out = static_cast<uint8_t*>(dst);
  const int heads = permuted_heads(name);
  if (heads == 0) {
    std::memcpy(out, f.data(), row_bytes * rows);
    return;
  }
  // As read(): within each head of D rows, file row 2i + s holds HF row s * D/2 + i.
  if (rows % (2 * heads) != 0)
    throw Error(f.file->path() + ": tensor for " + name + " has " + std::to_string(rows) + " rows, not " +
                std::to_string(heads) + " heads of an even size");
  const int64_t D = rows / heads, half = D / 2;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t s = 0; s < 2; ++s)
        std::memcpy(out + (h * D + s * half + i) * row_bytes, f.data() + (h * D + 2 * i + s) * row_bytes, row_bytes);
}

std::optional<Tensor> GgufWeights::view_packed(const std::string& name, const std::vector<int64_t>& expected) const {
  const std::optional<DType> dt = packed_dtype(name, expected);
  if (!dt || permuted_heads(name) > 0) return std::nullopt;
  const GgufShards::Found f = find(name, expected);
  return Tensor(const_cast<uint8_t*>(f.data()), *dt, expected);
}

}  // namespace vireo
