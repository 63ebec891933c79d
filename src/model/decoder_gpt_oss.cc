// GPT-OSS's MoE layers at load (DecoderModel::load_gpt_oss_moe): the router with its bias, and the experts
// turned into the stacked layout MoeParams takes. The checkpoint keeps each expert's matrices as
// [in, out] (gate_up_proj [E, hidden, 2I] with gate and up in alternate columns, down_proj [E, I, hidden]),
// or in MXFP4 as [out, in] blocks (openai/gpt-oss-*: *_blocks / *_scales, dequantized here, so the model
// runs in the weight dtype); they become [E, 2I, hidden] = [gate; up] rows and [E, hidden, I].
#include <cstring>
#include <numeric>

#include "core/error.h"
#include "model/decoder_model.h"
#include "model/mxfp4.h"

namespace vireo {
namespace {
constexpr float kDummyStd = 0.02f;

// [gate; up] rows from alternating ones: row r < I is source row 2r, row I + r is 2r + 1.
std::vector<int64_t> deinterleave(int64_t I) {
  std::vector<int64_t> rows(static_cast<size_t>(2 * I));
  for (int64_t r = 0; r < I; ++r) {
    rows[r] = 2 * r;
    rows[I + r] = 2 * r + 1;
  }
  return rows;
}
}  // namespace

Tensor DecoderModel::load_gpt_oss_experts(const std::string& name, int64_t E, int64_t rows, int64_t cols,
                                          const std::vector<int64_t>& row_of) {
  if (!ckpt_) return load(name, {{name, {E, rows, cols}}}, kDummyStd);
  const bool mxfp4 = !ckpt_->has(name) && ckpt_->has(name + "_blocks");
  if (mxfp4 && cols % 32 != 0) throw Error(name + "_blocks: the input width " + std::to_string(cols) + " is not a multiple of 32");
  std::optional<Tensor> packed, scales, dense;
  std::vector<float> whole;  // the dense tensor as F32 where the source has no host view
  if (mxfp4) {
    packed = ckpt_->view(name + "_blocks", {E, rows, cols / 32, 16});
    scales = ckpt_->view(name + "_scales", {E, rows, cols / 32});
    if (!packed || !scales || packed->dtype != DType::kU8 || scales->dtype != DType::kU8)
      throw Error(name + "_blocks / _scales: MXFP4 experts must be U8 safetensors tensors");
  } else {
    dense = ckpt_->view(name, {E, cols, rows});
    if (!dense) {
      whole.resize(static_cast<size_t>(E * rows * cols));
      ckpt_->read(name, {E, cols, rows}, DType::kF32, whole.data());
    }
  }
  Tensor dev = be_->alloc({E, rows, cols}, wdtype_);
  owned_.push_back(dev);
  const size_t es = dtype_size(wdtype_);
  std::vector<float> src(static_cast<size_t>(rows * cols)), out(src.size()), in(mxfp4 ? 0 : src.size());
  std::vector<uint8_t> host(src.size() * es);
  for (int64_t e = 0; e < E; ++e) {
    if (mxfp4) {  // src [rows, cols] (output features as rows already)
      mxfp4_dequantize(packed->ptr<uint8_t>() + e * rows * cols / 2, scales->ptr<uint8_t>() + e * rows * cols / 32, rows,
                       cols / 32, src.data());
    } else {  // [cols, rows] -> [rows, cols]
      if (dense) {
        convert_to_f32(static_cast<const char*>(dense->data) + e * rows * cols * dtype_size(dense->dtype), dense->dtype,
                       in.data(), rows * cols);
      } else {
        std::memcpy(in.data(), whole.data() + e * rows * cols, in.size() * sizeof(float));
      }
      for (int64_t c = 0; c < cols; ++c)
        for (int64_t r = 0; r < rows; ++r) src[r * cols + c] = in[c * rows + r];
    }
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(out.data() + r * cols, src.data() + row_of[r] * cols, cols * sizeof(float));
    store_f32_as(out.data(), rows * cols, wdtype_, host.data());
    Tensor slice(static_cast<char*>(dev.data) + e * rows * cols * es, wdtype_, {rows, cols}, dev.device);
    be_->copy_from_host(host.data(), slice);
    be_->synchronize();
  }
  return dev;
}

void DecoderModel::load_gpt_oss_moe(const std::string& m, DecoderLayerWeights& w) {
  const int64_t hidden = cfg_.hidden_size, E = cfg_.num_experts, I = cfg_.moe_intermediate_size;
  w.router_w = load(m + "router.weight", {{m + "router.weight", {E, hidden}}}, kDummyStd);
  w.router_b = load(m + "router.bias", {{m + "router.bias", {E}}}, kDummyStd);
  const std::string x = m + "experts.";
  if (ckpt_ && ckpt_->experts_as_rows()) {  // GGUF: already [gate; up] rows, [out, in] matrices
    w.experts_gate_up = load(x + "gate_up_proj", {{x + "gate_up_proj", {E, 2 * I, hidden}}}, kDummyStd);
    w.experts_down = load(x + "down_proj", {{x + "down_proj", {E, hidden, I}}}, kDummyStd);
    w.experts_gate_up_b = load(x + "gate_up_proj_bias", {{x + "gate_up_proj_bias", {E, 2 * I}}}, kDummyStd);
    w.experts_down_b = load(x + "down_proj_bias", {{x + "down_proj_bias", {E, hidden}}}, kDummyStd);
    return;
  }
  w.experts_gate_up = load_gpt_oss_experts(x + "gate_up_proj", E, 2 * I, hidden, deinterleave(I));
  std::vector<int64_t> same(static_cast<size_t>(hidden));
  std::iota(same.begin(), same.end(), 0);
  w.experts_down = load_gpt_oss_experts(x + "down_proj", E, hidden, I, same);
  std::vector<int64_t> experts(static_cast<size_t>(E));
  std::iota(experts.begin(), experts.end(), 0);
  w.experts_gate_up_b = load_remapped(x + "gate_up_proj_bias", {E, 2 * I}, experts, deinterleave(I), kDummyStd);
  w.experts_down_b = load(x + "down_proj_bias", {{x + "down_proj_bias", {E, hidden}}}, kDummyStd);
}

}  // namespace vireo
