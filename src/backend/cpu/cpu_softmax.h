// The exact softmax numerators of the CPU attention paths (prefill GEMM blocks and decode rows).
#pragma once

#include <cmath>

namespace vireo::cpu {

// Gemma 2's logit soft-capping: sc[i] <- cap * tanh(sc[i] / cap) (scores after the softmax scale); cap 0: none.
inline void softcap_scores(float* sc, int n, float cap) {
  if (cap <= 0.0f) return;
  for (int i = 0; i < n; ++i) sc[i] = cap * std::tanh(sc[i] / cap);
}

// sc[0, n) <- e^(sc - m) (vectorised exp, ~1e-7 relative error), m = max(max(sc), sink); returns their
// sum plus e^(sink - m): an attention sink (GPT-OSS, AttentionParams::sinks) is one more logit without a
// value. sink -inf: none (m = max(sc)).
float softmax_numerators(float* sc, int n, float sink = -INFINITY);

}  // namespace vireo::cpu
