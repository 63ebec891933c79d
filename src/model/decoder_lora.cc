// LoRA adapters on the decoder's attention and dense-MLP projections (vLLM's --enable-lora).
//
// Each adapter's q/k/v (and gate/up) parts are stacked so a fused projection takes its delta in two
// linears per run of rows: mid = x A^T ([rows, R]), then out += mid B^T, B holding each part's
// scale * lora_B in its output rows and its own rank's columns (zeros elsewhere). Rows of different
// adapters in one step take their own pair of linears (StepTensors::lora_rows); base-model rows none.
// Built from the backend's linear and add ops only, so every backend runs it; steps with adapter rows
// run eagerly (no decode graphs, no fused decode forms).
#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/log.h"
#include "model/decoder_model.h"
#include "model/weight_source.h"

namespace vireo {

LoraPair DecoderModel::upload_lora_pair(const std::vector<const LoraModule*>& parts, const std::vector<int64_t>& offsets,
                                        int64_t out_rows, float extra_scale) {
  int64_t rank = 0, in = 0;
  for (const LoraModule* m : parts)
    if (m) rank += m->rank, in = m->in_features;
  if (rank == 0) return {};
  // R padded with zero rows / columns to a multiple of 16: the device GEMV and GEMM kernels read rows of
  // 16-byte vectors (a rank-4 BF16 row is 8 bytes); the zeros add nothing to the delta.
  rank = (rank + 15) / 16 * 16;
  std::vector<float> a(static_cast<size_t>(rank * in), 0.0f), b(static_cast<size_t>(out_rows * rank), 0.0f);
  int64_t r0 = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const LoraModule* m = parts[i];
    if (!m) continue;
    std::copy(m->a.begin(), m->a.end(), a.begin() + r0 * in);
    const float s = m->scale * extra_scale;
    for (int64_t row = 0; row < m->out_features; ++row)
      for (int64_t c = 0; c < m->rank; ++c)
        b[static_cast<size_t>((offsets[i] + row) * rank + r0 + c)] = s * m->b[static_cast<size_t>(row * m->rank + c)];
    r0 += m->rank;
  }
  auto upload = [&](const std::vector<float>& host, std::vector<int64_t> shape) {
    Tensor dev = be_->alloc(shape, wdtype_);
    std::vector<uint8_t> bytes(dev.nbytes());
    store_as(Tensor(const_cast<float*>(host.data()), DType::kF32, shape), wdtype_, bytes.data());
    be_->copy_from_host(bytes.data(), dev);
    return dev;
  };
  LoraPair pair{upload(a, {rank, in}), upload(b, {out_rows, rank})};
  be_->synchronize();
  return pair;
}

void DecoderModel::add_lora(int32_t id, const LoraAdapter& adapter) {
  if (id <= 0) throw Error("add_lora: adapter ids start at 1");
  if (loras_.count(id)) throw Error("add_lora: adapter id " + std::to_string(id) + " is in use");
  if (!(wdtype_ == DType::kF32 || wdtype_ == DType::kBF16 || wdtype_ == DType::kF16))
    throw Error("LoRA adapters need float weights, not " + std::string(dtype_name(wdtype_)));
  const int64_t hidden = cfg_.hidden_size, inter = cfg_.intermediate_size;
  const int64_t qd = static_cast<int64_t>(cfg_.num_attention_heads) * cfg_.head_dim;
  const int64_t kvd = static_cast<int64_t>(cfg_.num_key_value_heads) * cfg_.head_dim;
  const float residual_scale = cfg_.residual_multiplier > 0 ? cfg_.residual_multiplier : 1.0f;  // Granite
  const ModuleNames& n = spec_.names;
  const std::string at = n.attn + ".", mp = n.mlp + ".";
  const std::string src = "LoRA adapter " + adapter.path;

  // Per layer, the parts of each projection: {module name, rows offset, rows, in features}.
  struct Slot {
    std::string module;
    int group;  // 0 qkv, 1 o, 2 gate_up, 3 down
    int64_t offset, rows, in;
  };
  const std::vector<Slot> slots = {
      {at + "q_proj", 0, 0, qd, hidden},         {at + "k_proj", 0, qd, kvd, hidden},
      {at + "v_proj", 0, qd + kvd, kvd, hidden}, {at + "qkv_proj", 0, 0, qd + 2 * kvd, hidden},
      {at + n.o_proj, 1, 0, hidden, qd},         {mp + n.gate_proj, 2, 0, inter, hidden},
      {mp + n.up_proj, 2, inter, inter, hidden}, {mp + "gate_up_proj", 2, 0, 2 * inter, hidden},
      {mp + n.down_proj, 3, 0, hidden, inter}};
  const int L = cfg_.num_hidden_layers;
  std::vector<std::vector<std::vector<const LoraModule*>>> parts(
      L, std::vector<std::vector<const LoraModule*>>(4));
  std::vector<std::vector<std::vector<int64_t>>> offsets(L, std::vector<std::vector<int64_t>>(4));
  for (const LoraModule& m : adapter.modules) {
    if (m.layer < 0 || m.layer >= L)
      throw Error(src + ": layer " + std::to_string(m.layer) + " is outside the model's " + std::to_string(L));
    auto slot = std::find_if(slots.begin(), slots.end(), [&](const Slot& s) { return s.module == m.module; });
    if (slot == slots.end())
      throw Error(src + ": module '" + m.module + "' (layer " + std::to_string(m.layer) +
                  ") is not supported: LoRA applies to " + at + "{q,k,v,qkv," + n.o_proj + "}_proj and " + mp + "{" +
                  n.gate_proj + "," + n.up_proj + ",gate_up_proj," + n.down_proj + "}");
    const DecoderLayerWeights& w = layers_[m.layer];
    const bool attention = (!w.qkv_w.empty() || !w.qkv_parts.empty()) && w.attn_gate_w.empty();
    const bool dense_mlp = !w.gate_up_w.empty();
    if (slot->group <= 1 ? !attention : !dense_mlp)
      throw Error(src + ": layer " + std::to_string(m.layer) + " has no " +
                  (slot->group <= 1 ? "plain attention" : "dense MLP") + " for module '" + m.module +
                  "' (LoRA covers attention and dense MLP projections only)");
    if (m.in_features != slot->in || m.out_features != slot->rows)
      throw Error(src + ": layer " + std::to_string(m.layer) + " " + m.module + " is [" + std::to_string(m.out_features) +
                  " x " + std::to_string(m.in_features) + "], the model's is [" + std::to_string(slot->rows) + " x " +
                  std::to_string(slot->in) + "]");
    parts[m.layer][slot->group].push_back(&m);
    offsets[m.layer][slot->group].push_back(slot->offset);
  }
  std::vector<LoraLayerWeights> layers(L);
  for (int l = 0; l < L; ++l) {
    layers[l].qkv = upload_lora_pair(parts[l][0], offsets[l][0], qd + 2 * kvd, 1.0f);
    layers[l].o = upload_lora_pair(parts[l][1], offsets[l][1], hidden, residual_scale);
    layers[l].gate_up = upload_lora_pair(parts[l][2], offsets[l][2], 2 * inter, 1.0f);
    layers[l].down = upload_lora_pair(parts[l][3], offsets[l][3], hidden, residual_scale);
  }
  loras_[id] = std::move(layers);
  log_info("LoRA adapter {} loaded as id {}: {} modules, rank up to {}", adapter.path, id, adapter.modules.size(),
           adapter.max_rank);
}

void DecoderModel::remove_lora(int32_t id) {
  auto it = loras_.find(id);
  if (it == loras_.end()) return;
  be_->synchronize();  // no step in flight reads them
  for (LoraLayerWeights& lw : it->second)
    for (LoraPair* p : {&lw.qkv, &lw.o, &lw.gate_up, &lw.down})
      if (!p->a.empty()) be_->free(p->a), be_->free(p->b);
  loras_.erase(it);
}

void DecoderModel::free_lora_scratch() {
  if (!lora_mid_.empty()) be_->free(lora_mid_);
  if (!lora_delta_.empty()) be_->free(lora_delta_);
  lora_mid_ = lora_delta_ = Tensor();
}

void DecoderModel::apply_lora(const StepTensors& st, int layer, LoraPair LoraLayerWeights::*pair_of, const Tensor& x,
                              const Tensor& out) {
  for (const StepTensors::LoraRows& run : st.lora_rows) {
    auto it = loras_.find(run.id);
    if (it == loras_.end()) throw Error("forward: no LoRA adapter with id " + std::to_string(run.id));
    const LoraPair& pair = it->second[layer].*pair_of;
    if (pair.a.empty()) continue;
    const int64_t rows = run.end - run.begin, rank = pair.a.dim(0), m = pair.b.dim(0);
    const DType act = be_->activation_dtype();
    if (lora_mid_.empty() || lora_mid_.numel() < st.T * rank) {
      if (!lora_mid_.empty()) be_->free(lora_mid_);
      lora_mid_ = be_->alloc({st.T * std::max<int64_t>(rank, 64)}, act);
    }
    if (lora_delta_.empty() || lora_delta_.numel() < st.T * m) {
      if (!lora_delta_.empty()) be_->free(lora_delta_);
      lora_delta_ = be_->alloc({st.T * std::max(m, x.dim(1))}, act);
    }
    const Tensor mid = lora_mid_.view({lora_mid_.numel()}).slice_rows(0, rows * rank).view({rows, rank});
    const Tensor delta = lora_delta_.view({lora_delta_.numel()}).slice_rows(0, rows * m).view({rows, m});
    const Tensor xs = x.slice_rows(run.begin, run.end), os = out.slice_rows(run.begin, run.end);
    LinearParams p;
    p.x = xs;
    p.w = pair.a;
    p.out = mid;
    be_->linear(p);  // x A^T
    p.x = mid;
    p.w = pair.b;
    p.out = delta;
    be_->linear(p);  // (x A^T) B^T, scaled
    be_->add({os, delta, os});
  }
}

}  // namespace vireo
