// Step sizes that suit the GEMMs' tiles (SchedulerConfig::step_align_tokens). A mixed step's linears run
// one row per scheduled token in tiles of 128 rows: a step of 2,130 tokens pays for 17 row tiles, the last
// one 64% empty, and with 32 to 192 column tiles over 132 SMs its last wave of tiles may be mostly idle.
// Trimming the newest prefill chunk by the step's remainder (2,130 -> 2,048) defers those tokens to the
// next step, which computes them anyway; decode rows and speculative drafts are never trimmed.
#pragma once

#include "engine/scheduler.h"

namespace vireo {

// Trims the last prefill chunk of `out` (a scheduled entry of more than `excess` new tokens, no drafts, no
// token in flight) by `excess` = total % align, where the step holds at least min_tiles * align tokens.
// Returns the tokens taken off (0 when align <= 0, the step is small, already aligned, or no chunk is long
// enough). total_num_scheduled_tokens is the caller's to update.
int align_step_tokens(SchedulerOutput& out, int align, int min_tiles = 4);

}  // namespace vireo
