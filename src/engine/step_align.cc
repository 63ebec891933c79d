#include "engine/step_align.h"

namespace vireo {

int align_step_tokens(SchedulerOutput& out, int align, int min_tiles) {
  if (align <= 0) return 0;
  int total = 0;
  for (const auto& s : out.scheduled) total += s.num_new_tokens;
  const int excess = total % align;
  if (total < min_tiles * align || excess == 0) return 0;
  // Newest first: admitted requests come last, and the newest has waited least.
  for (auto it = out.scheduled.rbegin(); it != out.scheduled.rend(); ++it) {
    if (it->num_spec_tokens > 0 || it->token_in_flight || it->num_new_tokens <= excess) continue;
    it->num_new_tokens -= excess;
    return excess;
  }
  return 0;
}

}  // namespace vireo
