// Per-request recurrent-state slots (Qwen3.5's Gated DeltaNet layers keep a fixed-size state per
// sequence instead of per-token KV). The model holds the states, one per slot; the scheduler gives
// each running request a slot and takes it back on preemption or finish (vLLM's mamba cache slots).
#pragma once
#include <cstdint>
#include <vector>

namespace vireo {

class StateSlotPool {
 public:
  explicit StateSlotPool(int num_slots) : num_slots_(num_slots) {
    // Hand out low slots first (a deterministic mapping helps debugging).
    for (int s = num_slots - 1; s >= 0; --s) free_.push_back(s);
  }
  bool enabled() const { return num_slots_ > 0; }
  int num_free() const { return static_cast<int>(free_.size()); }
  // A free slot, or -1 if none is left.
  int32_t acquire() {
    if (free_.empty()) return -1;
    const int32_t s = free_.back();
    free_.pop_back();
    return s;
  }
  void release(int32_t slot) {
    if (slot < 0) return;
    free_.push_back(slot);
  }

 private:
  std::vector<int32_t> free_;
  int num_slots_ = 0;
};

}  // namespace vireo
