#include "engine/scheduler.h"

#include <algorithm>
#include <set>
#include <unordered_map>

#include "core/error.h"
#include "engine/step_align.h"

namespace vireo {

Scheduler::Scheduler(const SchedulerConfig& cfg)
    : cfg_(cfg), kv_(cfg.num_blocks, cfg.block_size, cfg.enable_prefix_caching && cfg.num_state_slots == 0),
      state_slots_(cfg.num_state_slots),
      eos_(cfg.eos_token_ids.begin(), cfg.eos_token_ids.end()) {}

void Scheduler::add_request(std::shared_ptr<Request> req) {
  if (requests_.count(req->request_id)) throw Error("request id '" + req->request_id + "' is already in use");
  req->status = RequestStatus::kWaiting;
  req->arrival_seq = num_added_++;
  requests_[req->request_id] = req;
  enqueue_waiting(std::move(req), false);
}

void Scheduler::enqueue_waiting(std::shared_ptr<Request> req, bool preempted) {
  if (cfg_.policy == SchedulingPolicy::kPriority) {
    // Sorted insert (after equals, though keys are unique): the front is always the most important.
    auto at = std::upper_bound(waiting_.begin(), waiting_.end(), req,
                               [](const auto& a, const auto& b) { return comes_before(*a, *b); });
    waiting_.insert(at, std::move(req));
  } else if (preempted) {
    waiting_.push_front(std::move(req));
  } else {
    waiting_.push_back(std::move(req));
  }
}

std::shared_ptr<Request> Scheduler::find(const std::string& id) const {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : it->second;
}

std::vector<std::string> Scheduler::unfinished_ids() const {
  std::vector<std::string> ids;
  for (const auto& r : running_) ids.push_back(r->request_id);
  for (const auto& r : waiting_) ids.push_back(r->request_id);
  return ids;
}

void Scheduler::release_resources(Request& req) {
  kv_.free(req);
  state_slots_.release(req.state_slot);
  req.state_slot = -1;
}

void Scheduler::preempt(std::shared_ptr<Request> req) {
  // Recompute: drop the KV (and recurrent state), keep the generated tokens; prompt + output run
  // again as a prefill.
  release_resources(*req);
  req->num_computed_tokens = 0;
  req->spec_token_ids.clear();
  req->status = RequestStatus::kPreempted;
  ++req->num_preemptions;
  ++num_preemptions_;
  enqueue_waiting(std::move(req), true);
}

size_t Scheduler::remove_running(const std::shared_ptr<Request>& victim, SchedulerOutput& out, int& budget) {
  const auto it = std::find(running_.begin(), running_.end(), victim);
  const size_t index = static_cast<size_t>(it - running_.begin());
  running_.erase(it);
  auto s = std::find_if(out.scheduled.begin(), out.scheduled.end(), [&](const auto& x) { return x.req == victim; });
  if (s != out.scheduled.end()) {
    budget += s->num_new_tokens;
    out.scheduled.erase(s);
  }
  return index;
}

bool Scheduler::preempt_for_waiting(const Request& req, int num_new, const ComputedBlocks& computed,
                                    SchedulerOutput& out, int& budget) {
  std::vector<std::shared_ptr<Request>> after;  // running requests less important than req, least first
  for (const auto& r : running_)
    if (comes_before(req, *r)) after.push_back(r);
  std::sort(after.begin(), after.end(), [](const auto& a, const auto& b) { return comes_before(*b, *a); });
  std::vector<const Request*> candidates;
  for (const auto& r : after) candidates.push_back(r.get());
  // Counted first so that nobody is preempted for a request that would still not fit.
  const auto num_victims = kv_.num_requests_to_free(candidates, kv_.num_blocks_short(req, num_new, computed), computed);
  if (!num_victims) return false;
  for (int v = 0; v < *num_victims; ++v) {
    remove_running(after[v], out, budget);
    out.preempted.push_back(after[v]->request_id);
    preempt(after[v]);
  }
  return true;
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput out;
  int budget = cfg_.max_num_batched_tokens;

  // 1. Running requests, oldest first.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    auto req = running_[i];
    int num_new = std::min(req->num_tokens() - req->num_computed_tokens, budget);
    if (num_new <= 0) {
      ++i;
      continue;
    }
    // Drafts ride along with a decoding request's one token.
    int num_spec = num_new == 1 && req->num_tokens() - req->num_computed_tokens == 1
                       ? num_drafts_to_schedule(*req, budget - 1)
                       : 0;
    num_new += num_spec;
    bool scheduled = false;
    while (true) {
      if (kv_.allocate_slots(*req, num_new)) {
        scheduled = true;
        break;
      }
      if (num_spec > 0) {  // drafts never cost another request its blocks: without them first
        num_new -= num_spec;
        num_spec = 0;
        continue;
      }
      // Out of blocks: preempt the newest running request (fcfs), or the least important (priority);
      // possibly this one. Either way none that comes before req: it is running too.
      std::shared_ptr<Request> victim;
      if (cfg_.policy == SchedulingPolicy::kPriority) {
        victim = *std::max_element(running_.begin(), running_.end(),
                                   [](const auto& a, const auto& b) { return comes_before(*a, *b); });
        // One scheduled earlier in this step gives its tokens back; the ones after it shift down.
        if (remove_running(victim, out, budget) < i) --i;
      } else {
        victim = running_.back();
        running_.pop_back();
      }
      out.preempted.push_back(victim->request_id);
      preempt(victim);
      if (victim == req) break;
    }
    if (!scheduled) break;  // req itself was preempted; nothing after it is left
    out.scheduled.push_back({req, num_new, num_spec});
    budget -= num_new;
    ++i;
  }

  // 2. Waiting requests (not in a step that had to preempt: memory is tight).
  if (out.preempted.empty()) admit_waiting(out, budget, /*may_preempt=*/true);
  budget += align_step_tokens(out, cfg_.step_align_tokens);
  out.total_num_scheduled_tokens = cfg_.max_num_batched_tokens - budget;
  return out;
}

void Scheduler::admit_waiting(SchedulerOutput& out, int& budget, bool may_preempt, int num_leaving) {
  std::set<int32_t> active_loras;  // the running requests' adapters (--max-loras)
  if (cfg_.max_loras > 0)
    for (const auto& r : running_)
      if (r->params.lora_id != 0) active_loras.insert(r->params.lora_id);
  std::vector<std::shared_ptr<Request>> skipped;  // waiting for room for their adapter, in order
  while (!waiting_.empty() && budget > 0 && static_cast<int>(running_.size()) - num_leaving < cfg_.max_num_seqs) {
    auto req = waiting_.front();
    const int32_t lora = req->params.lora_id;
    if (cfg_.max_loras > 0 && lora != 0 && !active_loras.count(lora) &&
        static_cast<int>(active_loras.size()) >= cfg_.max_loras) {
      skipped.push_back(req);
      waiting_.pop_front();
      continue;
    }
    ComputedBlocks computed;
    if (req->num_computed_tokens == 0) computed = kv_.get_computed_blocks(*req);
    int num_new = std::min(req->num_tokens() - req->num_computed_tokens - computed.num_tokens, budget);
    if (num_new <= 0) throw Error("Scheduler: request '" + req->request_id + "' has nothing to compute");
    // Recurrent-state models: a slot per running request (max_num_seqs of them, so one is free
    // whenever running_ has room; checked anyway).
    if (state_slots_.enabled() && state_slots_.num_free() == 0) break;
    // Priority policy: a waiting request may take the blocks of less important running ones (vLLM v0's
    // priority preemption; v1 only preempts for running requests). Then memory is tight: it is the last.
    bool made_room = false;
    if (!kv_.allocate_slots(*req, num_new, computed)) {
      if (!may_preempt || cfg_.policy != SchedulingPolicy::kPriority || !preempt_for_waiting(*req, num_new, computed, out, budget) ||
          !kv_.allocate_slots(*req, num_new, computed))
        break;
      made_room = true;
    }
    if (state_slots_.enabled()) req->state_slot = state_slots_.acquire();
    waiting_.pop_front();
    if (req->num_cached_tokens < 0) {
      req->num_cached_tokens = std::min(computed.num_tokens, req->num_prompt_tokens());
    }
    if (req->status == RequestStatus::kWaiting) kv_.record_prefix_stats(req->num_tokens(), computed.num_tokens);
    req->num_computed_tokens += computed.num_tokens;
    req->status = RequestStatus::kRunning;
    running_.push_back(req);
    if (cfg_.max_loras > 0 && lora != 0) active_loras.insert(lora);
    out.scheduled.push_back({req, num_new});
    budget -= num_new;
    if (made_room) break;
  }
  waiting_.insert(waiting_.begin(), skipped.begin(), skipped.end());
}

std::optional<SchedulerOutput> Scheduler::schedule_continuation(const SchedulerOutput& prev, bool allow_grammar) {
  if (!prev.preempted.empty() || prev.scheduled.empty()) return std::nullopt;
  SchedulerOutput out;
  int budget = cfg_.max_num_batched_tokens;
  std::unordered_map<const Request*, int> ahead;  // tokens `prev` computes, per request
  int num_leaving = 0;                            // requests that stop by length after `prev`
  // 1. The requests `prev` samples for: their next token decodes.
  for (const auto& s : prev.scheduled) {
    const Request& req = *s.req;
    if (s.num_spec_tokens > 0) return std::nullopt;
    if (req.is_finished()) continue;  // aborted meanwhile: its row in `prev` is dropped
    ahead[&req] = s.num_new_tokens;
    const int start = req.num_computed_tokens + s.num_new_tokens;
    if (start < req.num_tokens()) continue;  // a prefill chunk that samples nothing: part 2
    const SamplingParams& p = req.params;
    // A grammar's mask needs the previous token, which a step issued ahead does not have yet: only if
    // the caller samples the step later (allow_grammar). Penalties need the output history on the host.
    if (p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f ||
        (req.matcher && !allow_grammar))
      return std::nullopt;
    // After `prev` the request holds num_tokens() + 1 tokens and num_output_tokens() + 1 outputs: it
    // stops by length (its seat counts as free, as in schedule() after `prev`).
    if (req.num_output_tokens() + 1 >= p.max_tokens || req.num_tokens() + 1 >= cfg_.max_model_len) {
      ++num_leaving;
      continue;
    }
    if (budget == 0 || !kv_.allocate_slots(*s.req, s.num_new_tokens + 1)) return std::nullopt;
    out.scheduled.push_back({s.req, 1, 0, s.num_new_tokens, true});
    --budget;
  }
  // 2. The other running requests: their next prefill chunks (a decode token `prev` did not run too).
  for (const auto& r : running_) {
    if (budget == 0) break;
    const auto it = ahead.find(r.get());
    const int num_ahead = it == ahead.end() ? 0 : it->second;
    const int remaining = r->num_tokens() - r->num_computed_tokens - num_ahead;
    if (remaining <= 0) continue;  // in part 1 (or stopping after `prev`)
    const int num_new = std::min(remaining, budget);
    if (!kv_.allocate_slots(*r, num_ahead + num_new)) return std::nullopt;
    out.scheduled.push_back({r, num_new, 0, num_ahead, false});
    budget -= num_new;
  }
  // 3. Waiting requests.
  admit_waiting(out, budget, /*may_preempt=*/false, num_leaving);
  if (out.scheduled.empty()) return std::nullopt;
  budget += align_step_tokens(out, cfg_.step_align_tokens);
  out.total_num_scheduled_tokens = cfg_.max_num_batched_tokens - budget;
  return out;
}

Scheduler::GrammarVerdict Scheduler::advance_grammar(Request& req, int32_t token) const {
  if (!req.matcher) return GrammarVerdict::kContinue;
  if (!req.grammar_active) {  // still reasoning: the grammar starts after its end token
    req.grammar_active = token == req.params.grammar_start_token;
    return GrammarVerdict::kContinue;
  }
  if (!req.matcher->accept_token(token)) return GrammarVerdict::kRejected;
  return req.matcher->is_terminated() ? GrammarVerdict::kDone : GrammarVerdict::kContinue;
}

// vLLM v1's order: the length cap first (a final EOS at max_tokens reports "length"), then EOS
// and stop tokens, which min_tokens holds off.
bool Scheduler::check_stop(Request& req) const {
  const auto& p = req.params;
  if (req.num_output_tokens() >= p.max_tokens || req.num_tokens() >= cfg_.max_model_len) {
    req.finish_reason = FinishReason::kLength;
    return true;
  }
  if (req.num_output_tokens() < p.min_tokens || req.output_token_ids.empty()) return false;
  int32_t last = req.output_token_ids.back();
  if (!p.ignore_eos && eos_.count(last)) {
    req.finish_reason = FinishReason::kStop;
    return true;
  }
  if (std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), last) != p.stop_token_ids.end()) {
    req.finish_reason = FinishReason::kStop;
    req.stop_token_id = last;
    return true;
  }
  return false;
}

int Scheduler::num_drafts_to_schedule(const Request& req, int budget) const {
  if (req.spec_token_ids.empty()) return 0;
  // Up to 1 + drafts tokens come out: within max_tokens; drafts sit at positions num_tokens() onwards.
  const int k = std::min({static_cast<int>(req.spec_token_ids.size()), budget,
                          req.params.max_tokens - req.num_output_tokens() - 1, cfg_.max_model_len - 1 - req.num_tokens()});
  return std::max(k, 0);
}

void Scheduler::accept_drafts(const ScheduledRequest& s, int32_t first, const std::vector<int32_t>& rest,
                              RequestUpdate& u) {
  Request& req = *s.req;
  const int K = s.num_spec_tokens;
  if (static_cast<int>(rest.size()) != K || static_cast<int>(req.spec_token_ids.size()) < K)
    throw Error("Scheduler::update_from_output: request '" + req.request_id + "' ran " + std::to_string(K) +
                " drafts but has " + std::to_string(rest.size()) + " draft samples");
  auto target = [&](int j) { return j == 0 ? first : rest[j - 1]; };
  int a = 0;
  while (a < K && req.spec_token_ids[a] == target(a)) ++a;
  u.num_draft_tokens = K;
  u.num_accepted_tokens = a;
  // The K/V of the request's own tokens and of the kept drafts are right; the rest get overwritten.
  const int computed = req.num_computed_tokens + (s.num_new_tokens - K) + a;
  req.spec_token_ids.clear();
  for (int j = 0; j <= a; ++j) {
    req.append_output_token(target(j));
    u.new_token_ids.push_back(target(j));
    if (check_stop(req)) {
      u.finished = true;
      break;
    }
  }
  req.num_computed_tokens = std::min(computed, req.num_tokens());
  kv_.cache_computed_blocks(req);
  if (u.finished) finish_request(req.request_id, req.finish_reason);
}

std::vector<RequestUpdate> Scheduler::update_from_output(const SchedulerOutput& out,
                                                         const std::vector<std::optional<int32_t>>& sampled,
                                                         const std::vector<std::vector<int32_t>>& draft_samples) {
  if (sampled.size() != out.scheduled.size()) throw Error("Scheduler::update_from_output: sampled size mismatch");
  std::vector<RequestUpdate> updates;
  for (size_t i = 0; i < out.scheduled.size(); ++i) {
    const auto& s = out.scheduled[i];
    Request& req = *s.req;
    if (req.is_finished()) continue;  // finished meanwhile (abort between schedule and update)
    if (s.num_spec_tokens > 0) {
      if (!sampled[i]) throw Error("Scheduler::update_from_output: request '" + req.request_id + "' ran drafts unsampled");
      static const std::vector<int32_t> kNone;
      RequestUpdate u{s.req, {}, false};
      accept_drafts(s, *sampled[i], i < draft_samples.size() ? draft_samples[i] : kNone, u);
      updates.push_back(std::move(u));
      continue;
    }
    req.num_computed_tokens += s.num_new_tokens;
    kv_.cache_computed_blocks(req);
    if (req.num_computed_tokens < req.num_tokens() || !sampled[i]) continue;  // chunked prefill
    req.append_output_token(*sampled[i]);
    RequestUpdate u{s.req, {*sampled[i]}, false};
    if (!req.grammar_error.empty()) {  // its mask could not be made (sampling_batch.cc): this request fails
      req.error = req.grammar_error;
      req.error_from_request = true;
      finish_request(req.request_id, FinishReason::kError);
      u.finished = true;
      updates.push_back(std::move(u));
      continue;
    }
    const GrammarVerdict grammar = advance_grammar(req, *sampled[i]);
    if (check_stop(req)) {
      finish_request(req.request_id, req.finish_reason);
      u.finished = true;
    } else if (grammar != GrammarVerdict::kContinue) {
      // Complete (nothing but EOS may follow; with ignore_eos too) or, were the mask not applied, broken.
      if (grammar == GrammarVerdict::kRejected)
        req.error = "structured output: token " + std::to_string(*sampled[i]) + " is not allowed by the grammar";
      req.stopped_by_grammar = grammar == GrammarVerdict::kDone && !eos_.count(*sampled[i]);
      finish_request(req.request_id, grammar == GrammarVerdict::kDone ? FinishReason::kStop : FinishReason::kError);
      u.finished = true;
    }
    updates.push_back(std::move(u));
  }
  return updates;
}

std::shared_ptr<Request> Scheduler::finish_request(const std::string& id, FinishReason reason) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return nullptr;
  auto req = it->second;
  requests_.erase(it);
  if (auto r = std::find(running_.begin(), running_.end(), req); r != running_.end()) running_.erase(r);
  if (auto w = std::find(waiting_.begin(), waiting_.end(), req); w != waiting_.end()) waiting_.erase(w);
  release_resources(*req);
  req->status = RequestStatus::kFinished;
  req->finish_reason = reason;
  return req;
}

bool Scheduler::uses_lora(int32_t id) const {
  auto uses = [&](const std::shared_ptr<Request>& r) { return r->params.lora_id == id; };
  return std::any_of(waiting_.begin(), waiting_.end(), uses) || std::any_of(running_.begin(), running_.end(), uses);
}

std::vector<int32_t> Scheduler::lora_ids(bool running) const {
  std::vector<int32_t> ids;
  auto collect = [&](const auto& queue) {
    for (const auto& r : queue)
      if (r->params.lora_id != 0 && std::find(ids.begin(), ids.end(), r->params.lora_id) == ids.end())
        ids.push_back(r->params.lora_id);
  };
  running ? collect(running_) : collect(waiting_);
  return ids;
}

}  // namespace vireo
