// Splitting host-side load work (weight repacks, transposes) across the machine's threads: no pool, the
// threads live for one call. Kernels and per-step work use the backends' own pools, never this.
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace vireo {

// body(begin, end) over [0, n) in contiguous ranges, one a thread (the calling one too), at most max_threads.
inline void parallel_ranges(int64_t n, const std::function<void(int64_t, int64_t)>& body, int64_t max_threads = 1 << 10) {
  if (n <= 0) return;
  const int64_t nt =
      std::clamp<int64_t>(n, 1, std::min<int64_t>(max_threads, std::max(1u, std::thread::hardware_concurrency())));
  const int64_t chunk = (n + nt - 1) / nt;
  std::vector<std::thread> threads;
  for (int64_t t = 1; t < nt; ++t)
    if (t * chunk < n) threads.emplace_back(body, t * chunk, std::min(n, (t + 1) * chunk));
  body(0, std::min(n, chunk));
  for (auto& th : threads) th.join();
}

}  // namespace vireo
