// A PEFT LoRA adapter read from its directory (adapter_config.json + adapter_model.safetensors), as
// host F32 matrices per (layer, module). What vLLM's --lora-modules takes; the model decides which of
// its projections each module adds to (DecoderModel::add_lora).
//
// LoRA: y = W x + scale * B (A x), A: [r, in], B: [out, r], scale = lora_alpha / r (use_rslora:
// lora_alpha / sqrt(r)); rank_pattern / alpha_pattern override r / lora_alpha per module.
#pragma once
#include <string>
#include <vector>

namespace vireo {

struct LoraModule {
  int layer = 0;
  std::string module;  // the path inside the layer, e.g. "self_attn.q_proj", "mlp.down_proj"
  int rank = 0;
  int64_t in_features = 0, out_features = 0;
  float scale = 1.0f;
  std::vector<float> a;  // [rank, in_features]
  std::vector<float> b;  // [out_features, rank]
};

struct LoraAdapter {
  std::string path;
  int max_rank = 0;
  std::vector<LoraModule> modules;  // ordered by (layer, module)
};

// Reads the adapter at `dir`. Refuses, naming the field or tensor: DoRA, LoRA biases, fan_in_fan_out,
// modules_to_save, embedding / lm_head LoRA, tensors outside model layers, ranks above max_rank
// (vLLM's --max-lora-rank; 0: no limit), and A/B pairs whose shapes disagree.
LoraAdapter load_lora_adapter(const std::string& dir, int max_rank = 0);

}  // namespace vireo
