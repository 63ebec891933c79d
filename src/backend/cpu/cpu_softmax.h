// The exact softmax numerators of the CPU attention paths (prefill GEMM blocks and decode rows).
#pragma once

#include <cmath>

namespace vireo::cpu {

// Gemma 2's logit soft-capping: sc[i] <- cap * tanh(sc[i] / cap) (scores after the softmax scale); cap 0: none.
inline void softcap_scores(float* sc, int n, float cap) {
  if (cap <= 0.0f) return;
  for (int i = 0; i < n; ++i) sc[i] = cap * std::tanh(sc[i] / cap);
}

// sc[0, n) <- e^(sc - max(sc)) (vectorised exp, ~1e-7 relative error); returns their sum.
float softmax_numerators(float* sc, int n);

}  // namespace vireo::cpu
