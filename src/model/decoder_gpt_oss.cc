// GPT-OSS's MoE layers at load (DecoderModel::load_gpt_oss_moe): the router with its bias, and the experts
// turned into the stacked layout MoeParams takes. The checkpoint keeps each expert's matrices as
// [in, out] (gate_up_proj [E, hidden, 2I] with gate and up in alternate columns, down_proj [E, I, hidden]),
// or in MXFP4 as [out, in] blocks (openai/gpt-oss-*: *_blocks / *_scales); they become [E, 2I, hidden] =
// [gate; up] rows and [E, hidden, I]. MXFP4 experts stay packed where the backend's moe takes them
// (MoeParams' MXFP4 form: the gate / up deinterleave is a permutation of packed rows), else they are
// dequantized to the weight dtype (LoadOptions::dequantize_mxfp4). GGUF files hold [gate; up] rows already,
// MXFP4 in ggml's blocks (repacked by GgufWeights::read_mxfp4). Dummy experts are MXFP4 too, as the
// released checkpoints are, where hidden and I are multiples of 32 (else dense random values).
#include <algorithm>
#include <cstring>
#include <numeric>

#include "core/error.h"
#include "core/log.h"
#include "core/parallel_ranges.h"
#include "model/decoder_model.h"
#include "model/dummy_weights.h"
#include "model/mxfp4.h"

namespace vireo {
namespace {
constexpr float kDummyStd = 0.02f;
// Dummy MXFP4 experts: uniform nibbles (E2M1 values of std 2.93) at scale bytes 119 / 120 (2^-8 / 2^-7):
// std ~0.018, near the other dummy weights' 0.02.
constexpr int kDummyScaleLo = 119, kDummyScaleHi = 120;

// [gate; up] rows from alternating ones: row r < I is source row 2r, row I + r is 2r + 1.
std::vector<int64_t> deinterleave(int64_t I) {
  std::vector<int64_t> rows(static_cast<size_t>(2 * I));
  for (int64_t r = 0; r < I; ++r) {
    rows[r] = 2 * r;
    rows[I + r] = 2 * r + 1;
  }
  return rows;
}

std::vector<int64_t> identity(int64_t n) {
  std::vector<int64_t> rows(static_cast<size_t>(n));
  std::iota(rows.begin(), rows.end(), 0);
  return rows;
}

// dst [E, rows, width] bytes with row r of expert e copied from src row row_of[r] of that expert.
void permute_rows(const uint8_t* src, int64_t E, int64_t rows, int64_t width, const std::vector<int64_t>& row_of,
                  uint8_t* dst) {
  parallel_ranges(E * rows, [&](int64_t b, int64_t end) {
    for (int64_t i = b; i < end; ++i)
      std::memcpy(dst + i * width, src + (i / rows * rows + row_of[i % rows]) * width, width);
  });
}

}  // namespace

bool DecoderModel::keep_mxfp4_experts() const {
  return !opts_.dequantize_mxfp4 && be_->supports_mxfp4_moe(wdtype_);
}

Tensor DecoderModel::load_gpt_oss_experts(const std::string& name, int64_t E, int64_t rows, int64_t cols,
                                          const std::vector<int64_t>& row_of, ExpertsForm form, Tensor* scales) {
  const bool gguf = ckpt_ && ckpt_->experts_as_rows();
  if (form == ExpertsForm::kDense || (gguf && form == ExpertsForm::kMxfp4Dequantized)) {
    // Dense dummy values, or a GGUF tensor as read() gives it (ggml's dequantization).
    if (!ckpt_ || gguf) return load(name, {{name, {E, rows, cols}}}, kDummyStd);
  }
  if (form == ExpertsForm::kDense) {  // the checkpoint's [E, cols, rows]: transposed expert by expert
    std::optional<Tensor> dense = ckpt_->view(name, {E, cols, rows});
    std::vector<float> whole;  // the dense tensor as F32 where the source has no host view
    if (!dense) {
      whole.resize(static_cast<size_t>(E * rows * cols));
      ckpt_->read(name, {E, cols, rows}, DType::kF32, whole.data());
    }
    const size_t es = dtype_size(wdtype_);
    return alloc_filled({E, rows, cols}, wdtype_, [&](uint8_t* dst) {
      parallel_ranges(E, [&](int64_t b, int64_t end) {
        std::vector<float> in(static_cast<size_t>(rows * cols)), out(in.size());
        for (int64_t e = b; e < end; ++e) {
          if (dense) {
            convert_to_f32(static_cast<const char*>(dense->data) + e * rows * cols * dtype_size(dense->dtype),
                           dense->dtype, in.data(), rows * cols);
          } else {
            std::memcpy(in.data(), whole.data() + e * rows * cols, in.size() * sizeof(float));
          }
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = in[c * rows + row_of[r]];
          store_f32_as(out.data(), rows * cols, wdtype_, dst + e * rows * cols * es);
        }
      }, /*max_threads=*/8);  // each holds two F32 experts (133 MB for gpt-oss-20b's gate_up)
    });
  }

  // MXFP4: the packed bytes in source row order, blocks [E, rows, cols / 2] and scales [E, rows, cols / 32]:
  // views of the safetensors file, or made here (dummy values, a GGUF's blocks repacked).
  if (cols % 32 != 0) throw Error(name + ": MXFP4 experts need an input width that is a multiple of 32, not " + std::to_string(cols));
  const std::vector<int64_t> bshape{E, rows, cols / 2}, sshape{E, rows, cols / 32};
  const int64_t num_blocks = E * rows * cols / 32;
  std::vector<uint8_t> held_blocks, held_scales;
  std::optional<Tensor> blocks_view, scales_view;
  if (!ckpt_ || gguf) {
    held_blocks.resize(static_cast<size_t>(num_blocks * 16));
    held_scales.resize(static_cast<size_t>(num_blocks));
    if (!ckpt_) {
      fill_dummy_bytes(held_blocks.data(), num_blocks * 16, opts_.seed, name + "_blocks", 0, 255);
      fill_dummy_bytes(held_scales.data(), num_blocks, opts_.seed, name + "_scales", kDummyScaleLo, kDummyScaleHi);
    } else {
      ckpt_->read_mxfp4(name, {E, rows, cols}, held_blocks.data(), held_scales.data());
    }
  } else {
    blocks_view = ckpt_->view(name + "_blocks", {E, rows, cols / 32, 16});
    scales_view = ckpt_->view(name + "_scales", sshape);
    if (!blocks_view || !scales_view || blocks_view->dtype != DType::kU8 || scales_view->dtype != DType::kU8)
      throw Error(name + "_blocks / _scales: MXFP4 experts must be U8 safetensors tensors");
  }
  const uint8_t* src_blocks = blocks_view ? blocks_view->ptr<uint8_t>() : held_blocks.data();
  const uint8_t* src_scales = scales_view ? scales_view->ptr<uint8_t>() : held_scales.data();

  if (form == ExpertsForm::kMxfp4Dequantized) {  // row by row, straight to the weight dtype
    const size_t es = dtype_size(wdtype_);
    return alloc_filled({E, rows, cols}, wdtype_, [&](uint8_t* dst) {
      parallel_ranges(E * rows, [&](int64_t b, int64_t end) {
        std::vector<float> row(static_cast<size_t>(cols));
        for (int64_t i = b; i < end; ++i) {
          const int64_t src = i / rows * rows + row_of[i % rows];
          mxfp4_dequantize(src_blocks + src * cols / 2, src_scales + src * cols / 32, 1, cols / 32, row.data());
          store_f32_as(row.data(), cols, wdtype_, dst + i * cols * es);
        }
      });
    });
  }
  // Packed. A safetensors view in row order needs no copy on the CPU (the mmapped file is the weight).
  if (blocks_view && row_of == identity(rows)) {
    Tensor b = be_->upload(blocks_view->view(bshape), DType::kU8), s = be_->upload(*scales_view, DType::kU8);
    owned_.push_back(b);
    owned_.push_back(s);
    *scales = s;
    return b;
  }
  *scales = alloc_filled(sshape, DType::kU8,
                         [&](uint8_t* dst) { permute_rows(src_scales, E, rows, cols / 32, row_of, dst); });
  return alloc_filled(bshape, DType::kU8,
                      [&](uint8_t* dst) { permute_rows(src_blocks, E, rows, cols / 2, row_of, dst); });
}

void DecoderModel::load_gpt_oss_moe(const std::string& m, DecoderLayerWeights& w) {
  const int64_t hidden = cfg_.hidden_size, E = cfg_.num_experts, I = cfg_.moe_intermediate_size;
  w.router_w = load(m + "router.weight", {{m + "router.weight", {E, hidden}}}, kDummyStd);
  w.router_b = load(m + "router.bias", {{m + "router.bias", {E}}}, kDummyStd);
  const std::string x = m + "experts.";
  const bool gguf = ckpt_ && ckpt_->experts_as_rows();  // already [gate; up] rows, [out, in] matrices
  auto stored_mxfp4 = [&](const std::string& name) {
    if (!ckpt_) return hidden % 32 == 0 && I % 32 == 0;  // dummy
    if (gguf) return ckpt_->stored_as_mxfp4(name);
    return !ckpt_->has(name) && ckpt_->has(name + "_blocks");
  };
  // Packed only when both are MXFP4: MoeParams takes both projections in one form.
  const bool gate_up_mxfp4 = stored_mxfp4(x + "gate_up_proj"), down_mxfp4 = stored_mxfp4(x + "down_proj");
  const bool packed = gate_up_mxfp4 && down_mxfp4 && keep_mxfp4_experts();
  mxfp4_source_ = mxfp4_source_ || gate_up_mxfp4 || down_mxfp4;
  auto form = [&](bool mxfp4) {
    return packed ? ExpertsForm::kMxfp4Packed : mxfp4 ? ExpertsForm::kMxfp4Dequantized : ExpertsForm::kDense;
  };
  w.experts_gate_up = load_gpt_oss_experts(x + "gate_up_proj", E, 2 * I, hidden, gguf ? identity(2 * I) : deinterleave(I),
                                           form(gate_up_mxfp4), &w.experts_gate_up_s);
  w.experts_down = load_gpt_oss_experts(x + "down_proj", E, hidden, I, identity(hidden), form(down_mxfp4),
                                        &w.experts_down_s);
  if (gguf) {
    w.experts_gate_up_b = load(x + "gate_up_proj_bias", {{x + "gate_up_proj_bias", {E, 2 * I}}}, kDummyStd);
  } else {
    w.experts_gate_up_b = load_remapped(x + "gate_up_proj_bias", {E, 2 * I}, identity(E), deinterleave(I), kDummyStd);
  }
  w.experts_down_b = load(x + "down_proj_bias", {{x + "down_proj_bias", {E, hidden}}}, kDummyStd);
}

void DecoderModel::log_gpt_oss_experts() const {
  size_t bytes = 0;
  bool packed = false;
  for (const auto& w : layers_) {
    for (const Tensor* t : {&w.experts_gate_up, &w.experts_down, &w.experts_gate_up_s, &w.experts_down_s})
      if (!t->empty()) bytes += t->nbytes();
    packed = packed || !w.experts_gate_up_s.empty();
  }
  const double gib = static_cast<double>(bytes) / (1 << 30);
  if (packed) {
    log_info("GPT-OSS experts: MXFP4, kept packed ({:.2f} GiB)", gib);
  } else if (mxfp4_source_) {
    const std::string why = opts_.dequantize_mxfp4 ? "VIREO_MXFP4=dequantize"
                                                    : "the " + be_->name() + " backend's moe takes no MXFP4 experts with " +
                                                          std::string(dtype_name(wdtype_)) + " weights";
    log_info("GPT-OSS experts: MXFP4 dequantized to {} at load ({:.2f} GiB; {})", dtype_name(wdtype_), gib, why);
  } else {
    log_info("GPT-OSS experts: {} ({:.2f} GiB)", dtype_name(wdtype_), gib);
  }
}

}  // namespace vireo
