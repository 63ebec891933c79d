#include "engine/step_input_builder.h"

#include <algorithm>
#include <unordered_map>

#include "core/error.h"

namespace vireo {

namespace {

// The parts every step shares: block-table width (the longest table), empty rows, query_start = {0}.
void start_step(const SchedulerOutput& out, StepInput& in) {
  const int num_seqs = static_cast<int>(out.scheduled.size());
  int max_blocks = 1;
  for (const auto& s : out.scheduled) max_blocks = std::max<int>(max_blocks, s.req->block_ids.size());
  in.max_blocks_per_seq = max_blocks;
  in.token_ids.reserve(out.total_num_scheduled_tokens);
  in.positions.reserve(out.total_num_scheduled_tokens);
  in.slot_mapping.reserve(out.total_num_scheduled_tokens);
  in.query_start.reserve(num_seqs + 1);
  in.query_start.push_back(0);
  in.block_tables.assign(static_cast<size_t>(num_seqs) * max_blocks, 0);
}

// Recurrent-state models give every running request a slot; a step mixing requests with and without
// one would hand the model wrong slots.
// A step with no adapter rows carries no lora_ids (the model's fast paths look for an empty list).
void drop_base_only_lora_ids(StepInput& in) {
  if (std::all_of(in.lora_ids.begin(), in.lora_ids.end(), [](int32_t id) { return id == 0; })) in.lora_ids.clear();
}

void check_state_slots(const StepInput& in) {
  if (!in.state_slots.empty() && in.state_slots.size() + 1 != in.query_start.size())
    throw Error("build_step_input: some scheduled requests have no recurrent-state slot");
}

}  // namespace

BuiltStep build_step_input(const SchedulerOutput& out, int block_size) {
  BuiltStep b;
  StepInput& in = b.input;
  const int num_seqs = static_cast<int>(out.scheduled.size());
  start_step(out, in);
  const int max_blocks = in.max_blocks_per_seq;

  for (int i = 0; i < num_seqs; ++i) {
    const ScheduledRequest& s = out.scheduled[i];
    const Request& req = *s.req;
    const int start = s.start();
    const int n = s.num_new_tokens;
    const int num_spec = s.num_spec_tokens;
    // A token in flight (async scheduling) sits at position num_tokens(): the request's last after it.
    const int num_tokens = req.num_tokens() + (s.token_in_flight ? 1 : 0);
    const int end = start + n, own_end = end - num_spec;  // drafts at [own_end, end)
    // Tokens in flight come first, one a request (their ids are copied on the device as one block).
    const bool bad_in_flight = s.token_in_flight && (n != 1 || (i > 0 && !out.scheduled[i - 1].token_in_flight));
    if (own_end > num_tokens || (num_spec > 0 && own_end != num_tokens) ||
        num_spec > static_cast<int>(req.spec_token_ids.size()) || bad_in_flight)
      throw Error("build_step_input: request '" + req.request_id + "' scheduled past its tokens");
    if ((end + block_size - 1) / block_size > static_cast<int>(req.block_ids.size()))
      throw Error("build_step_input: request '" + req.request_id + "' has too few KV blocks");
    const int row0 = static_cast<int>(in.token_ids.size());
    for (int pos = start; pos < end; ++pos) {
      // The token in flight: 0 here, the model takes it from the previous step's samples on the device.
      in.token_ids.push_back(pos >= own_end                ? req.spec_token_ids[pos - own_end]
                             : pos < req.num_tokens()      ? req.all_token_ids[pos]
                                                           : 0);
      in.positions.push_back(pos);
      in.slot_mapping.push_back(req.block_ids[pos / block_size] * block_size + pos % block_size);
    }
    in.query_start.push_back(static_cast<int>(in.token_ids.size()));
    in.seq_lens.push_back(end);
    if (req.state_slot >= 0) in.state_slots.push_back(req.state_slot);
    in.lora_ids.push_back(req.params.lora_id);
    std::copy(req.block_ids.begin(), req.block_ids.end(), in.block_tables.begin() + static_cast<size_t>(i) * max_blocks);

    // Prompt logprobs: position p scores prompt token p + 1, for p < num_prompt - 1.
    if (req.params.prompt_logprobs && !req.prompt_logprobs_sent) {
      const int last = std::min(end, req.num_prompt_tokens() - 1);
      for (int p = start; p < last; ++p) {
        in.logits_indices.push_back(row0 + (p - start));
        b.rows.push_back({i, p});
      }
    }
    if (own_end == num_tokens) {  // the request's prefill is complete: sample its next token
      for (int j = 0; j <= num_spec; ++j) {  // and after each draft
        in.logits_indices.push_back(row0 + n - 1 - num_spec + j);
        b.rows.push_back({i, -1, j});
      }
    }
  }
  check_state_slots(in);
  drop_base_only_lora_ids(in);
  return b;
}

BuiltStep build_continuation_input(const SchedulerOutput& out, const SchedulerOutput& prev, const BuiltStep& prev_built,
                                   int block_size) {
  BuiltStep b = build_step_input(out, block_size);
  // The row of `prev` that samples each request's next token.
  std::unordered_map<const Request*, int32_t> row_of;
  for (size_t r = 0; r < prev_built.rows.size(); ++r) {
    const LogitsRowInfo& info = prev_built.rows[r];
    if (info.prompt_pos < 0 && info.spec_index == 0) row_of[prev.scheduled[info.sched_index].req.get()] = static_cast<int32_t>(r);
  }
  for (const ScheduledRequest& s : out.scheduled) {
    if (!s.token_in_flight) break;  // they come first, one token each
    const auto it = row_of.find(s.req.get());
    if (it == row_of.end())
      throw Error("build_continuation_input: request '" + s.req->request_id + "' has no row in the step in flight");
    b.input.ids_from_last.push_back(it->second);
  }
  return b;
}

}  // namespace vireo
