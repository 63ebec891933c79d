// Host-side RoPE tables in the layout qkv_prepare reads.
#pragma once
#include <vector>

#include "model/model_config.h"

namespace vireo {

// inv_freq [rotary_dim / 2] as HF's rope init functions compute it (default, linear, dynamic,
// llama3, yarn, longrope, HunYuan's dynamic NTK-alpha), plus the attention scaling yarn and longrope
// fold into cos/sin.
struct RopeFrequencies {
  std::vector<float> inv_freq;
  float attention_scaling = 1.0f;
  // longrope: positions >= long_from rotate by inv_freq_long (transformers switches a whole forward to the
  // long factors once its sequence passes original_max_position_embeddings; per position here, so a
  // prompt longer than that differs from HF on its first positions only).
  std::vector<float> inv_freq_long;
  int long_from = 0;
};
RopeFrequencies rope_frequencies(const ModelConfig& c);

// [max_positions, rotary_dim] F32: row p = cos(p * inv_freq) * s, then sin(p * inv_freq) * s.
std::vector<float> rope_cos_sin_table(const ModelConfig& c, int max_positions);

}  // namespace vireo
