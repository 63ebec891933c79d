// The layers' dense projections in FP8 (--quantization fp8, LoadOptions::fp8_linears): each weight [M, K]
// is quantized per output row to E4M3 (scale = the row's max |w| / 448, core/fp8.h) at load. A backend
// whose linear takes FP8 weights (CUDA: W8A8 GEMMs, a weight-only GEMV for decode; the CPU: an FP8 GEMV
// for decode, dequantized bands for larger steps) keeps the codes and scales, half the bytes of BF16; any
// other (CUDA with f32 activations or batch-invariant) gets code x scale back in the weight dtype, so it
// computes with the same rounded weights. Embeddings, the lm_head, norms, biases and MoE experts stay as they are
// (vLLM's online FP8 also leaves the lm_head alone).
#include <cstring>

#include "core/log.h"
#include "core/parallel_ranges.h"
#include "model/decoder_model.h"
#include "model/dummy_weights.h"
#include "core/fp8.h"

namespace vireo {

Tensor DecoderModel::load_projection(const std::string& fused_name, const std::vector<Part>& parts, float stddev) {
  if (!opts_.fp8_linears) return load_linear(fused_name, parts, stddev);
  std::vector<int64_t> shape = parts[0].shape;
  for (size_t i = 1; i < parts.size(); ++i) shape[0] += parts[i].shape[0];
  const int64_t rows = shape[0], cols = shape.size() == 2 ? shape[1] : 0;
  // FP8 GEMMs want 16-byte rows (K % 16) and output widths in whole 16-byte vectors; others stay dense.
  if (shape.size() != 2 || cols % 16 != 0 || rows % 16 != 0) {
    ++fp8_.kept_dense;
    return load_linear(fused_name, parts, stddev);
  }
  // The weights in F32, as load() would read them: dummy values drawn in the weight dtype (so every
  // backend quantizes the same values), checkpoint values as stored (Phi-3's fused tensors read whole).
  std::vector<float> w(static_cast<size_t>(rows * cols));
  if (!ckpt_) {
    std::vector<uint8_t> h(Tensor(nullptr, wdtype_, shape).nbytes());
    Tensor t(h.data(), wdtype_, shape);
    fill_dummy(t, opts_.seed, fused_name, stddev);
    convert_to_f32(h.data(), wdtype_, w.data(), w.size());
  } else if (parts.size() > 1 && !ckpt_->has(parts[0].name) && ckpt_->has(fused_name)) {
    ckpt_->read(fused_name, shape, DType::kF32, w.data());
  } else {
    float* dst = w.data();
    for (const Part& p : parts) {
      ckpt_->read(p.name, p.shape, DType::kF32, dst);
      dst += p.shape[0] * cols;
    }
  }
  std::vector<uint8_t> q(w.size());
  std::vector<float> scale(static_cast<size_t>(rows));
  parallel_ranges(rows, [&](int64_t r0, int64_t r1) {
    fp8_quantize_rows(w.data() + r0 * cols, r1 - r0, cols, q.data() + r0 * cols, scale.data() + r0);
  });
  ++fp8_.tensors;
  fp8_.widened_bytes += static_cast<int64_t>(Tensor(nullptr, wdtype_, shape).nbytes());
  if (!be_->supports_fp8_linear()) {  // the same rounded weights, stored dense
    parallel_ranges(rows, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = 0; c < cols; ++c) w[r * cols + c] = fp8_e4m3_to_f32(q[r * cols + c]) * scale[r];
    });
    fp8_.bytes += static_cast<int64_t>(Tensor(nullptr, wdtype_, shape).nbytes());
    return alloc_filled(shape, wdtype_, [&](uint8_t* dst) { store_f32_as(w.data(), rows * cols, wdtype_, dst); });
  }
  Tensor s = alloc_filled({rows}, DType::kF32, [&](uint8_t* dst) { std::memcpy(dst, scale.data(), scale.size() * 4); });
  Tensor dev = alloc_filled(shape, DType::kF8E4M3, [&](uint8_t* dst) { std::memcpy(dst, q.data(), q.size()); });
  dev.row_scale = s.ptr<float>();
  fp8_.bytes += static_cast<int64_t>(q.size() + scale.size() * 4);
  return dev;
}

void DecoderModel::log_fp8_weights() const {
  if (!opts_.fp8_linears) return;
  const double gib = 1.0 / (1 << 30);
  log_info("--quantization fp8: {} projection weights quantized to F8_E4M3 per output row ({}): {:.2f} GiB instead of "
           "{:.2f} GiB in {}{}",
           fp8_.tensors,
           be_->supports_fp8_linear() ? "kept in FP8, run by FP8 kernels"
                                      : "stored dequantized in the weight dtype: this backend has no FP8 linears for "
                                        "these activations (CUDA's take bf16/f16 outside batch-invariant mode)",
           static_cast<double>(fp8_.bytes) * gib, static_cast<double>(fp8_.widened_bytes) * gib, dtype_name(wdtype_),
           fp8_.kept_dense ? "; " + std::to_string(fp8_.kept_dense) + " left dense (dimensions not multiples of 16)"
                           : std::string());
}

}  // namespace vireo
