// SchedulerOutput -> the flat StepInput the model runs, plus which logits row means what.
#pragma once
#include <vector>

#include "engine/scheduler.h"
#include "model/model.h"

namespace vireo {

struct LogitsRowInfo {
  int sched_index = 0;  // index into SchedulerOutput::scheduled
  // -1: the row samples the request's next token; else the prompt position p whose logits
  // score prompt token p + 1 (prompt logprobs).
  int prompt_pos = -1;
  // Speculative decoding: 0 for the row after the request's own last token, j for the row after its
  // j-th draft (the target's sample there checks draft j + 1, or is the token after the last one).
  int spec_index = 0;
};

struct BuiltStep {
  StepInput input;
  std::vector<LogitsRowInfo> rows;  // one per input.logits_indices entry
};

// Each scheduled request contributes tokens [num_computed, num_computed + num_new) of its
// all_token_ids (the last num_spec_tokens of them from its spec_token_ids, after all_token_ids); its KV
// slots come from its block table.
BuiltStep build_step_input(const SchedulerOutput& out, int block_size);
// Each request's tokens start at ScheduledRequest::start(); one whose token is in flight (async
// scheduling) runs it as its one token, with id 0 here.
// A continuation (Scheduler::schedule_continuation) of `prev`, the step still running, built with
// prev_built: as build_step_input, and input.ids_from_last names the row of `prev` whose sample is each
// token in flight (the model takes those ids from the previous step's sampled tokens on the device).
BuiltStep build_continuation_input(const SchedulerOutput& out, const SchedulerOutput& prev, const BuiltStep& prev_built,
                                   int block_size);

}  // namespace vireo
