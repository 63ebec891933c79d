// Key-split planning of the tensor-core attention kernels (attention_mma.cu): how many blocks share
// one (sequence, KV head)'s keys. Host-only, so the CPU tests check the plans (tests/backend_cpu).
#pragma once
#include <algorithm>
#include <cstdint>

namespace vireo::cuda {

constexpr int kSplitPlanTileKeys = 64;  // keys per tile of the decode kernel (kBN)

// The split count in [1, limit] of least cost(s) (ties: fewer splits); limit: each split at least
// min_keys long, at most cap splits.
template <typename Cost>
inline int least_cost_splits(int max_kv, int min_keys, int cap, Cost cost) {
  const int limit = static_cast<int>(std::clamp<int64_t>((max_kv + min_keys - 1) / min_keys, 1, cap));
  int best = 1;
  double best_cost = 1e30;
  for (int s = 1; s <= limit; ++s) {
    const double c = cost(s);
    if (c < best_cost - 1e-9) {
      best_cost = c;
      best = s;
    }
  }
  return best;
}

// Decode key splits for `base` (seq, kv head) pairs on `slots` resident blocks, contexts up to max_kv:
// the least time in tile units, waves x (tiles a split + a block's fixed cost). The fixed cost (block
// start, the first tile's latency, q rows; with splits the partial write and the merge) is what the
// waves-only model (choose_splits) leaves out: at 256 sequences planned for the decode graphs' 4096-key
// hint it chose 13 splits, so a 1k context ran as 9 blocks of 128 keys, each mostly ramp and merge.
inline int choose_decode_splits(int64_t base, int64_t slots, int max_kv, int min_keys, int cap) {
  return least_cost_splits(max_kv, min_keys, cap, [&](int s) {
    const double waves = static_cast<double>((base * s + slots - 1) / slots);
    const double tiles = static_cast<double>((max_kv + int64_t{s} * kSplitPlanTileKeys - 1) / (int64_t{s} * kSplitPlanTileKeys));
    return waves * (tiles + (s > 1 ? 2.0 : 1.0));
  });
}

// Key splits for `base` blocks of work on `slots` resident blocks: the fewest waves per unit of work,
// each split at least `min_keys` long, a small charge per split for the merge (ties: fewer splits).
inline int choose_splits(int64_t base, int64_t slots, int max_kv, int min_keys, int cap) {
  return least_cost_splits(max_kv, min_keys, cap, [&](int s) {
    const double waves = static_cast<double>((base * s + slots - 1) / slots);
    return waves / s + (s > 1 ? 0.0005 * s : 0.0);
  });
}

}  // namespace vireo::cuda
