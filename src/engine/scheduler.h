// Continuous batching with one rule (vLLM v1): each step, every running request gets as many of
// its not-yet-computed tokens as the token budget allows, then waiting requests are admitted.
// Chunked prefill, prefix-cache hits, decode and recompute after preemption all fall out of
// num_computed_tokens vs num_tokens. No model, no tensors: unit-tested on its own.
#pragma once
#include <deque>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/kv_cache_manager.h"
#include "engine/request.h"
#include "engine/scheduling_policy.h"
#include "engine/state_slot_pool.h"

namespace vireo {

struct SchedulerConfig {
  int max_num_seqs = 256;
  int max_num_batched_tokens = 2048;
  int max_model_len = 4096;
  int block_size = 16;
  int num_blocks = 1024;  // including the null block 0
  bool enable_prefix_caching = true;
  // Recurrent-state slots of the model (Model::num_state_slots()); > 0 gives every running request a
  // slot and turns prefix caching off (a cached prefix has no saved recurrent state).
  int num_state_slots = 0;
  std::vector<int32_t> eos_token_ids;  // stop the request unless ignore_eos
  SchedulingPolicy policy = SchedulingPolicy::kFcfs;
  // vLLM's --max-loras: at most this many distinct LoRA adapters among the running requests (a waiting
  // request of another adapter waits, and the ones behind it may go first); 0: no limit.
  int max_loras = 0;
  // Steps of at least 4 x this many tokens are trimmed to a multiple of it (step_align.h); 0: off.
  int step_align_tokens = 0;
};

struct ScheduledRequest {
  std::shared_ptr<Request> req;
  // Tokens [num_computed_tokens, num_computed_tokens + num_new_tokens) run; with drafts, the last
  // num_spec_tokens of them are req->spec_token_ids' first ones, after the request's own tokens.
  int num_new_tokens = 0;
  int num_spec_tokens = 0;
  // Async scheduling (a continuation): the request's tokens that the step still in flight computes
  // (not yet in num_computed_tokens); this step's tokens start after them. token_in_flight: this
  // step's one token is the one that step samples (its id not yet on the host).
  int num_computed_ahead = 0;
  bool token_in_flight = false;
  // The first position this step computes.
  int start() const { return req->num_computed_tokens + num_computed_ahead; }
};

struct SchedulerOutput {
  std::vector<ScheduledRequest> scheduled;  // running order
  int total_num_scheduled_tokens = 0;
  std::vector<std::string> preempted;       // preempted in this step (for logs/tests)
  bool empty() const { return scheduled.empty(); }
};

// What update_from_output reports per request that made progress or finished.
struct RequestUpdate {
  std::shared_ptr<Request> req;
  std::vector<int32_t> new_token_ids;  // 0 or 1 token this step; up to 1 + drafts with speculative decoding
  bool finished = false;
  int num_draft_tokens = 0, num_accepted_tokens = 0;  // drafts run this step, and those kept
};

class Scheduler {
 public:
  explicit Scheduler(const SchedulerConfig& cfg);

  void add_request(std::shared_ptr<Request> req);
  SchedulerOutput schedule();
  // Async scheduling: the step after `prev`, scheduled while `prev` is still running (its tokens
  // unknown, its num_computed_tokens not yet counted), as schedule() would after it:
  //  1. each request `prev` samples a token for decodes that token (token_in_flight), in `prev`'s
  //     order, unless it surely stops by length after `prev` (one that stops otherwise runs a row
  //     that is dropped);
  //  2. the other running requests take their next prefill chunks (host tokens), in running order;
  //  3. waiting requests are admitted as by schedule(), without preempting (the seats of requests that
  //     stop by length after `prev` count as free; their KV blocks do not yet).
  // nullopt (the engine then waits for `prev` and calls schedule()) when `prev` preempted or ran
  // drafts, when a request `prev` samples for needs its output history on the device (penalties), or
  // when a running request's KV blocks do not fit without preempting. Requests `prev` samples for with
  // a grammar only with allow_grammar: the engine then launches the step's sampling once `prev`'s
  // tokens have advanced the matchers (their masks need them).
  std::optional<SchedulerOutput> schedule_continuation(const SchedulerOutput& prev, bool allow_grammar = false);
  // sampled[i]: the token sampled for out.scheduled[i], or nullopt if its prefill is not done.
  // draft_samples[i] (only for requests with num_spec_tokens > 0): the tokens sampled at its draft
  // positions, one per draft. The leading drafts equal to the target's own samples are kept (sampled[i]
  // checks the first draft, draft_samples[i][j] the next), then the target's sample where they part, or
  // after the last draft: each kept token is a sample of the target model given the tokens before it, so
  // the output follows the same distribution as without drafts (for greedy rows, the same tokens).
  std::vector<RequestUpdate> update_from_output(const SchedulerOutput& out,
                                                const std::vector<std::optional<int32_t>>& sampled,
                                                const std::vector<std::vector<int32_t>>& draft_samples = {});
  // Finishes (abort, stop string, error) a request wherever it is, freeing its blocks.
  // Returns it (nullptr if unknown or already finished).
  std::shared_ptr<Request> finish_request(const std::string& id, FinishReason reason);

  bool has_unfinished() const { return !waiting_.empty() || !running_.empty(); }
  // Whether a waiting or running request uses LoRA adapter `id` (it may not be unloaded yet).
  bool uses_lora(int32_t id) const;
  // The distinct adapters of the running (or waiting) requests, in queue order.
  std::vector<int32_t> lora_ids(bool running) const;
  int num_running() const { return static_cast<int>(running_.size()); }
  int num_waiting() const { return static_cast<int>(waiting_.size()); }
  uint64_t num_preemptions() const { return num_preemptions_; }
  KvCacheManager& kv() { return kv_; }
  const KvCacheManager& kv() const { return kv_; }
  const SchedulerConfig& config() const { return cfg_; }
  std::shared_ptr<Request> find(const std::string& id) const;
  std::vector<std::string> unfinished_ids() const;  // running, then waiting

 private:
  void preempt(std::shared_ptr<Request> req);
  // Where a new or preempted request waits: fcfs at the back (new) or front (preempted); priority
  // in (priority, arrival) order.
  void enqueue_waiting(std::shared_ptr<Request> req, bool preempted);
  // Takes `victim` out of running_ and, if this step scheduled it, out of `out` (its tokens back into
  // `budget`). Returns its index in running_.
  size_t remove_running(const std::shared_ptr<Request>& victim, SchedulerOutput& out, int& budget);
  // Priority policy: preempts running requests that come after waiting `req`, least important first,
  // until num_new tokens fit; none if even all of them would not free enough. True when they fit.
  bool preempt_for_waiting(const Request& req, int num_new, const ComputedBlocks& computed, SchedulerOutput& out,
                           int& budget);
  // schedule()'s second part: admits waiting requests into `out` while the budget, max_num_seqs and the
  // KV blocks allow. may_preempt: the priority policy may preempt less important running requests.
  // num_leaving: running requests that stop before this step (their seats are free).
  void admit_waiting(SchedulerOutput& out, int& budget, bool may_preempt, int num_leaving = 0);
  void release_resources(Request& req);  // KV blocks and state slot
  bool check_stop(Request& req) const;
  // How many of req's drafts run with its next token: those that fit the budget after that token, the
  // model length and max_tokens (none for a request still prefilling).
  int num_drafts_to_schedule(const Request& req, int budget) const;
  // Appends a speculative step's kept tokens (sampled / draft_samples as in update_from_output).
  void accept_drafts(const ScheduledRequest& s, int32_t first, const std::vector<int32_t>& rest, RequestUpdate& u);
  // Moves the request's grammar (if any) past its new output token.
  enum class GrammarVerdict { kContinue, kDone, kRejected };
  GrammarVerdict advance_grammar(Request& req, int32_t token) const;

  SchedulerConfig cfg_;
  KvCacheManager kv_;
  StateSlotPool state_slots_;
  std::deque<std::shared_ptr<Request>> waiting_;
  std::vector<std::shared_ptr<Request>> running_;
  std::unordered_map<std::string, std::shared_ptr<Request>> requests_;
  std::set<int32_t> eos_;
  uint64_t num_preemptions_ = 0;
  uint64_t num_added_ = 0;  // arrival_seq of the next request
};

}  // namespace vireo
