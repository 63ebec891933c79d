// The CUDA attention's key-split planners (backend/cuda/attention_split_plan.h, host-only): the plans
// the H200 measurements chose, checked without a GPU. Slots: 132 SMs x 2 decode blocks an SM.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "backend/cuda/attention_split_plan.h"

namespace vireo::cuda {
namespace {

constexpr int64_t kSlots = 264;
constexpr int kCap = 128;

// attention_mma.cu's minimum split length: one tile when even 256-key splits leave slots idle.
int min_keys(int64_t pairs, int max_kv) { return pairs * ((max_kv + 255) / 256) < kSlots ? 64 : 256; }

int decode_plan(int seqs, int kv_heads, int max_kv) {
  const int64_t pairs = int64_t{seqs} * kv_heads;
  return choose_decode_splits(pairs, kSlots, max_kv, min_keys(pairs, max_kv), kCap);
}
int waves_plan(int seqs, int kv_heads, int max_kv) {
  const int64_t pairs = int64_t{seqs} * kv_heads;
  return choose_splits(pairs, kSlots, max_kv, min_keys(pairs, max_kv), kCap);
}

// Many sequences planned at the decode graphs' 4096-key hint: the waves-only model split each into
// 13 / 9 blocks of ramp and merge (0.6B batch 256 ran 16% slower end to end); one block each now.
TEST(AttentionSplitPlan, ManySequencesTakeOneSplit) {
  EXPECT_EQ(waves_plan(256, 8, 4096), 13);
  EXPECT_EQ(decode_plan(256, 8, 4096), 1);
  EXPECT_EQ(waves_plan(128, 8, 4096), 9);
  EXPECT_EQ(decode_plan(128, 8, 4096), 1);
  EXPECT_EQ(decode_plan(64, 8, 8192), 1);
  EXPECT_EQ(decode_plan(100, 8, 4096), 4);  // 800 pairs: 4 splits fill the last wave
}

// Where the waves-only plans were measured good, the fixed-cost model agrees.
TEST(AttentionSplitPlan, SmallBatchesAndLongContextsUnchanged) {
  for (auto [seqs, max_kv] : {std::pair{1, 8192}, {1, 32768}, {2, 4096}, {4, 4096}, {8, 4096}, {8, 8192},
                              {8, 16384}, {16, 4096}, {32, 4096}, {32, 8192}, {64, 4096}, {128, 1024}}) {
    SCOPED_TRACE(std::to_string(seqs) + " x " + std::to_string(max_kv));
    const int a = waves_plan(seqs, 8, max_kv), b = decode_plan(seqs, 8, max_kv);
    // Plans that round to the same split length are the same launch (attention_mma.cu re-derives the
    // count from the 64-key-rounded length): 33 and 32 splits of a 32k context are both 1024 keys.
    auto len = [&](int s) { return ((max_kv + s - 1) / s + kSplitPlanTileKeys - 1) / kSplitPlanTileKeys; };
    EXPECT_EQ(len(a), len(b)) << "waves " << a << " vs fixed-cost " << b;
  }
}

TEST(AttentionSplitPlan, LimitsHold) {
  EXPECT_EQ(decode_plan(1, 1, 64), 1);      // one tile: nothing to split
  EXPECT_LE(decode_plan(1, 1, 1 << 20), kCap);
  EXPECT_GE(decode_plan(1, 1, 1 << 20), 2);
  EXPECT_EQ(least_cost_splits(4096, 256, 128, [](int s) { return s == 5 ? 0.0 : 1.0; }), 5);
  EXPECT_EQ(least_cost_splits(4096, 256, 128, [](int) { return 1.0; }), 1);  // ties: fewer splits
}

}  // namespace
}  // namespace vireo::cuda
