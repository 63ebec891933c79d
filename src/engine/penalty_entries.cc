#include "engine/penalty_entries.h"

#include <algorithm>

namespace vireo {

void PenaltyEntries::add(int32_t id, int32_t output_count) {
  // Binary search over the ids at the even positions.
  size_t lo = 0, hi = pairs_.size() / 2;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (pairs_[2 * mid] < id) lo = mid + 1;
    else hi = mid;
  }
  if (lo < pairs_.size() / 2 && pairs_[2 * lo] == id) {
    pairs_[2 * lo + 1] += output_count;
    return;
  }
  const int32_t entry[2] = {id, output_count};
  pairs_.insert(pairs_.begin() + static_cast<std::ptrdiff_t>(2 * lo), entry, entry + 2);
}

void PenaltyEntries::rebuild(std::span<const int32_t> prompt, std::span<const int32_t> output) {
  // One sort of (id, from output) pairs, as a fresh build.
  std::vector<std::pair<int32_t, int32_t>> ids;
  ids.reserve(prompt.size() + output.size());
  for (int32_t t : prompt) ids.emplace_back(t, 0);
  for (int32_t t : output) ids.emplace_back(t, 1);
  std::sort(ids.begin(), ids.end());
  pairs_.clear();
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    int32_t count = 0;
    for (; j < ids.size() && ids[j].first == ids[i].first; ++j) count += ids[j].second;
    pairs_.push_back(ids[i].first);
    pairs_.push_back(count);
    i = j;
  }
  num_prompt_ = prompt.size();
  num_output_ = output.size();
  last_output_ = output.empty() ? 0 : output.back();
  built_ = true;
}

void PenaltyEntries::sync(std::span<const int32_t> prompt, std::span<const int32_t> output) {
  const bool same_history = built_ && prompt.size() == num_prompt_ && output.size() >= num_output_ &&
                            (num_output_ == 0 || output[num_output_ - 1] == last_output_);
  if (!same_history) {
    rebuild(prompt, output);
    return;
  }
  for (size_t i = num_output_; i < output.size(); ++i) add(output[i], 1);
  num_output_ = output.size();
  if (num_output_ > 0) last_output_ = output.back();
}

}  // namespace vireo
