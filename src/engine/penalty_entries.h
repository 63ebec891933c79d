// The penalty entries of one request, kept incrementally: (token id, times in the output) for every
// distinct id of prompt + output, sorted by id, flattened as the sample op's penalty_tokens rows
// (backend/op_params.h). The prompt is counted once; each step adds only the new output tokens, so a
// penalised request costs O(new tokens * log E + E) per step (E distinct ids: the copy out).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace vireo {

class PenaltyEntries {
 public:
  // Brings the entries up to date with prompt + output. Output is expected to grow by appends; if it
  // shrank, the prompt changed size, or the last counted token differs (the engine reset the output),
  // the entries are rebuilt from scratch.
  void sync(std::span<const int32_t> prompt, std::span<const int32_t> output);
  // [E, 2] flattened: id, count in the output; ids ascending. Valid after sync.
  const std::vector<int32_t>& pairs() const { return pairs_; }
  bool built() const { return built_; }

 private:
  void add(int32_t id, int32_t output_count);
  void rebuild(std::span<const int32_t> prompt, std::span<const int32_t> output);

  std::vector<int32_t> pairs_;
  size_t num_prompt_ = 0, num_output_ = 0;  // tokens counted so far
  int32_t last_output_ = 0;                 // output[num_output_ - 1] when counted
  bool built_ = false;
};

}  // namespace vireo
