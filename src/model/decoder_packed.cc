// Weight matrices (embeddings, linears, MoE experts) kept in a ggml block type (GGUF Q4_0 ... Q6_K) where
// the backend takes them (Backend::supports_packed_linear: the CPU). A Q4_K_M file then takes about its own
// size in memory instead of 3.5x that in BF16, and decode reads 2.6-8.5 bits a weight instead of 16. Fused
// weights (q/k/v, gate/up) keep their parts' rows as the file has them, which needs one block type for all
// parts. Q4_K_M files often give attn_v Q6_K beside a Q4_K attn_q: q/k/v then stay packed apart
// (packed_apart, DecoderLayerWeights::qkv_parts); another fused weight of mixed parts is dequantized and
// counted in the load log.
#include "core/log.h"
#include "core/quant_blocks.h"
#include "model/decoder_model.h"
#include "model/dummy_weights.h"

namespace vireo {

std::optional<DType> DecoderModel::packed_type(const std::vector<Part>& parts) {
  if (!ckpt_) {
    const DType t = opts_.dummy_block_dtype;
    if (!dtype_is_blocked(t) || !be_->supports_packed_linear(t)) return std::nullopt;
    for (const Part& p : parts)  // matrices, or stacked experts [E, rows, cols]
      if (p.shape.size() < 2 || p.shape.back() % qblocks::format(t).values != 0) return std::nullopt;
    return t;
  }
  if (opts_.dequantize_gguf) return std::nullopt;
  std::optional<DType> t;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::optional<DType> pt = ckpt_->packed_dtype(parts[i].name, parts[i].shape);
    if (!pt) return std::nullopt;
    if (i > 0 && *pt != *t) {
      if (be_->supports_packed_linear(*t)) ++packed_.mixed;  // a loss only where it would have stayed packed
      return std::nullopt;
    }
    t = pt;
  }
  if (!t || !be_->supports_packed_linear(*t)) return std::nullopt;
  return t;
}

bool DecoderModel::packed_apart(const std::vector<Part>& parts) {
  if (!ckpt_ || opts_.dequantize_gguf || parts.size() < 2) return false;
  std::optional<DType> first;
  bool differ = false;
  for (const Part& p : parts) {
    const std::optional<DType> t = ckpt_->packed_dtype(p.name, p.shape);
    if (!t || !be_->supports_packed_linear(*t)) return false;
    differ |= first && *t != *first;
    if (!first) first = t;
  }
  return differ;
}

Tensor DecoderModel::load_linear(const std::string& fused_name, const std::vector<Part>& parts, float stddev) {
  // Phi-3's fused projections, as load() reads them.
  if (ckpt_ && parts.size() > 1 && !ckpt_->has(parts[0].name) && ckpt_->has(fused_name)) {
    std::vector<int64_t> shape = parts[0].shape;
    for (size_t i = 1; i < parts.size(); ++i) shape[0] += parts[i].shape[0];
    return load_linear(fused_name, {{fused_name, shape}}, stddev);
  }
  const std::optional<DType> t = packed_type(parts);
  if (!t) return load(fused_name, parts, stddev);
  std::vector<int64_t> shape = parts[0].shape;
  for (size_t i = 1; i < parts.size(); ++i) shape[0] += parts[i].shape[0];
  Tensor dev;
  if (!ckpt_) {
    dev = alloc_filled(shape, *t, [&](uint8_t* dst) {
      Tensor h(dst, *t, shape);
      fill_dummy_blocks(h, opts_.seed, fused_name, stddev);
    });
  } else if (auto view = parts.size() == 1 ? ckpt_->view_packed(parts[0].name, parts[0].shape) : std::nullopt) {
    dev = be_->upload(*view, *t);  // the CPU keeps the mmapped blocks in place
    owned_.push_back(dev);
  } else {
    dev = alloc_filled(shape, *t, [&](uint8_t* dst) {
      for (const Part& p : parts) {
        ckpt_->read_packed(p.name, p.shape, dst);
        dst += Tensor(nullptr, *t, p.shape).nbytes();
      }
    });
  }
  ++packed_.tensors;
  packed_.bytes += static_cast<int64_t>(dev.nbytes());
  packed_.widened_bytes += static_cast<int64_t>(Tensor(nullptr, wdtype_, shape).nbytes());
  ++packed_.by_type[*t];
  return dev;
}

void DecoderModel::log_packed_weights() const {
  if (packed_.tensors == 0 && packed_.mixed == 0) return;
  std::string types;
  for (const auto& [t, n] : packed_.by_type)
    types += (types.empty() ? "" : ", ") + std::to_string(n) + " " + std::string(dtype_name(t));
  auto size = [](int64_t b) {
    return b >= (int64_t{1} << 30) ? fmt::format("{:.2f} GiB", static_cast<double>(b) / (1 << 30))
                                   : fmt::format("{:.1f} MiB", static_cast<double>(b) / (1 << 20));
  };
  log_info("packed weights: {} weight matrices kept in their block types ({}): {} instead of {} in {}{}",
           packed_.tensors, types, size(packed_.bytes), size(packed_.widened_bytes), dtype_name(wdtype_),
           packed_.mixed ? "; " + std::to_string(packed_.mixed) +
                               " fused weights dequantized (their parts have different block types)"
                         : std::string());
}

}  // namespace vireo
