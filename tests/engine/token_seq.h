// Prompt ids for scheduler and KV-cache tests: n ids counting up from `start`, wrapping at 50.
#pragma once
#include <cstdint>
#include <vector>

namespace vireo::testing {

inline std::vector<int32_t> seq(int n, int start = 0) {
  std::vector<int32_t> v(n);
  for (int i = 0; i < n; ++i) v[i] = (start + i) % 50;
  return v;
}

}  // namespace vireo::testing
