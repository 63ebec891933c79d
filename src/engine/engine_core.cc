#include "engine/engine_core.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <span>

#include "core/error.h"
#include "core/log.h"
#include "engine/ngram_proposer.h"
#include "engine/sampling_batch.h"
#include "engine/step_input_builder.h"
#include "structured/structured_output.h"
#include "structured/tokenizer_vocab.h"

namespace vireo {

double monotonic_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// vLLM's bucket bounds (vllm/v1/metrics/loggers.py).
EngineMetrics::EngineMetrics()
    : ttft({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
            80.0, 160.0, 640.0, 2560.0}),
      itl({0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}),
      e2e({0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
           960.0, 1920.0, 7680.0}) {}

namespace {

// The scheduler's settings the model decides: recurrent-state slots (and with them no prefix caching).
SchedulerConfig scheduler_config_for(const Model& model, SchedulerConfig sc) {
  sc.num_state_slots = model.num_state_slots();
  // Experiment (step_align.h): steps trimmed to whole GEMM row tiles; 0 (off) until measured.
  if (const char* v = std::getenv("VIREO_STEP_ALIGN")) sc.step_align_tokens = std::max(0, std::atoi(v));
  if (sc.num_state_slots > 0) {
    if (sc.num_state_slots < sc.max_num_seqs)
      throw Error("the model holds " + std::to_string(sc.num_state_slots) + " recurrent-state slots for max_num_seqs " +
                  std::to_string(sc.max_num_seqs));
    if (sc.enable_prefix_caching)
      log_info("prefix caching: off (the model's linear-attention layers keep recurrent state per request)");
    sc.enable_prefix_caching = false;
  }
  return sc;
}

}  // namespace

// scheduler_ is initialised before runner_ (declaration order), while `model` is still ours.
EngineCore::EngineCore(std::unique_ptr<Model> model, const Tokenizer* tok, const EngineCoreConfig& cfg)
    : cfg_(cfg), tok_(tok), scheduler_(scheduler_config_for(*model, cfg.scheduler)),
      runner_(std::move(model), cfg.scheduler.num_blocks, cfg.scheduler.block_size), rng_(cfg.seed) {
  if (cfg_.speculative.enabled() && cfg_.async_scheduling)
    throw Error("speculative decoding needs async scheduling off (--no-async-scheduling)");
  if (cfg_.speculative.enabled() && runner_.model().num_state_slots() > 0)
    throw Error("--speculative-config: not supported for models with recurrent state (their state cannot step back "
                "over rejected drafts)");
  metrics_.spec_accepted_per_pos.assign(cfg_.speculative.num_speculative_tokens, 0);
}

void EngineCore::propose_drafts(Request& req) {
  req.spec_token_ids.clear();
  const SpeculativeConfig& sc = cfg_.speculative;
  if (!sc.enabled() || req.is_finished()) return;
  if (sc.disable_by_batch_size > 0 && scheduler_.num_running() >= sc.disable_by_batch_size) return;
  const SamplingParams& p = req.params;
  const auto& words = p.bad_words_token_ids;
  if (req.matcher || p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f ||
      std::any_of(words.begin(), words.end(), [](const std::vector<int32_t>& w) { return w.size() > 1; }))
    return;
  req.spec_token_ids =
      propose_ngram(req.all_token_ids, sc.prompt_lookup_min, sc.prompt_lookup_max, sc.num_speculative_tokens);
}

EngineCore::~EngineCore() = default;

std::unique_ptr<structured::GrammarMatcher> EngineCore::make_matcher(const Request& req) {
  if (!tok_) throw Error("structured output needs a tokenizer");
  if (!vocab_index_) {
    const double t0 = monotonic_seconds();
    vocab_index_ = std::make_shared<const structured::VocabIndex>(structured::token_byte_strings(*tok_));
    structured::warm_up_json_masks(vocab_index_);
    log_info("structured output: vocabulary index of {} tokens built and warmed up in {:.0f} ms",
             vocab_index_->vocab_size(), (monotonic_seconds() - t0) * 1e3);
  }
  return std::make_unique<structured::GrammarMatcher>(req.params.grammar, vocab_index_,
                                                      scheduler_.config().eos_token_ids);
}

void EngineCore::add_request(std::shared_ptr<Request> req) {
  const std::string id = req->request_id;
  auto state = std::make_unique<RequestOutputState>(tok_, *req);
  std::string error;
  if (req->params.grammar) {
    try {
      req->matcher = make_matcher(*req);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  scheduler_.add_request(req);
  states_[id] = std::move(state);
  if (!error.empty()) {  // this request fails alone, as a failed step would
    req->error = error;
    scheduler_.finish_request(id, FinishReason::kError);
    on_finished(*req, monotonic_seconds());
    pending_outputs_.push_back(final_output_without_tokens(*req));
  }
}

RequestOutput EngineCore::final_output_without_tokens(const Request& req) {
  RequestOutput out;
  auto it = states_.find(req.request_id);
  if (it != states_.end()) {
    out = it->second->process(req, {}, {});
    states_.erase(it);
  }
  out.request_id = req.request_id;
  out.finished = true;
  out.finish_reason = finish_reason_name(req.finish_reason);
  out.error = req.error;
  out.error_from_request = req.error_from_request;
  return out;
}

void EngineCore::abort_request(const std::string& id) {
  auto req = scheduler_.finish_request(id, FinishReason::kAbort);
  if (!req) return;
  on_finished(*req, monotonic_seconds());
  pending_outputs_.push_back(final_output_without_tokens(*req));
}

std::vector<RequestOutput> EngineCore::fail_all(const std::string& message) {
  std::vector<RequestOutput> outputs;
  outputs.swap(pending_outputs_);
  if (inflight_) {  // its requests are failed below
    inflight_.reset();
    runner_.discard_launched();
  }
  const double now = monotonic_seconds();
  for (const auto& id : scheduler_.unfinished_ids()) {
    auto req = scheduler_.find(id);
    req->error = message;
    scheduler_.finish_request(id, FinishReason::kError);
    on_finished(*req, now);
    outputs.push_back(final_output_without_tokens(*req));
  }
  return outputs;
}

void EngineCore::on_finished(const Request& req, double now) {
  if (req.finish_reason == FinishReason::kStop || req.finish_reason == FinishReason::kLength) {
    ++metrics_.request_success_total;
  }
  metrics_.e2e.observe(now - req.arrival_time);
}

void EngineCore::fail_step(const SchedulerOutput& sched, const std::exception& e, std::vector<RequestOutput>& outputs) {
  // A failed forward finishes the requests of this step with "error"; the engine keeps going.
  log_error("step failed ({} requests): {}", sched.scheduled.size(), e.what());
  const double now = monotonic_seconds();
  for (auto& s : sched.scheduled) {
    s.req->error = e.what();
    auto req = scheduler_.finish_request(s.req->request_id, FinishReason::kError);
    if (!req) continue;
    on_finished(*req, now);
    outputs.push_back(final_output_without_tokens(*req));
  }
}

// The sampling of a continuation with grammar rows, once the step before it has been processed: its
// masks follow the matchers advanced by that step's tokens (pending_tokens 0: those are counted now).
// Its rows of requests that finished meanwhile are sampled and dropped, as any continuation's.
std::optional<std::pair<SchedulerOutput, std::string>> EngineCore::launch_deferred_sampling() {
  if (!inflight_ || !inflight_->sampling_deferred) return std::nullopt;
  try {
    const SamplingBatch batch =
        build_sampling_batch(inflight_->sched, inflight_->built, scheduler_.config().eos_token_ids, rng_,
                             /*pending_tokens=*/0, runner_.model().config().vocab_size, /*defer_masks=*/true);
    inflight_->ticket = runner_.launch_sampling(batch);
    inflight_->sampling_deferred = false;
    ++num_sampled_late_;
  } catch (const std::exception& e) {
    std::pair<SchedulerOutput, std::string> failed{std::move(inflight_->sched), e.what()};
    inflight_.reset();
    runner_.discard_launched();
    return failed;
  }
  return std::nullopt;
}

void EngineCore::launch_continuation(const LaunchedStep& cur) {
  if (!runner_.model().supports_async_sampling()) return;
  std::optional<SchedulerOutput> next = scheduler_.schedule_continuation(cur.sched, /*allow_grammar=*/true);
  if (!next) return;
  LaunchedStep step;
  step.built = build_continuation_input(*next, cur.sched, cur.built, scheduler_.config().block_size);
  const double t_sched = monotonic_seconds();
  for (auto& s : next->scheduled)
    if (s.req->first_scheduled_time < 0) s.req->first_scheduled_time = t_sched;
  // Ids from the device only where some token is in flight (a step of prefill chunks alone has none).
  const bool from_last = !step.built.input.ids_from_last.empty();
  // Rows whose mask depends on the token still in flight (a grammar; a bad word of several tokens) are
  // sampled once that token is processed.
  auto late_mask = [](const ScheduledRequest& s) {
    const auto& words = s.req->params.bad_words_token_ids;
    return s.req->matcher != nullptr ||
           std::any_of(words.begin(), words.end(), [](const std::vector<int32_t>& w) { return w.size() > 1; });
  };
  if (std::any_of(next->scheduled.begin(), next->scheduled.end(), late_mask)) {
    runner_.launch_forward(step.built, from_last);
    step.sampling_deferred = true;
  } else {
    const SamplingBatch batch =
        build_sampling_batch(*next, step.built, scheduler_.config().eos_token_ids, rng_, /*pending_tokens=*/1,
                             runner_.model().config().vocab_size);
    step.ticket = runner_.launch(step.built, batch, from_last);
  }
  step.sched = std::move(*next);
  inflight_ = std::move(step);
  ++num_launched_ahead_;
}

std::vector<RequestOutput> EngineCore::step() {
  std::vector<RequestOutput> outputs;
  outputs.swap(pending_outputs_);
  profile_.begin();
  LaunchedStep cur;
  if (inflight_) {  // launched by the previous call (async scheduling)
    cur = std::move(*inflight_);
    inflight_.reset();
  } else {
    SchedulerOutput sched = scheduler_.schedule();
    if (sched.empty()) return outputs;
    if (cfg_.pooling.enabled) {
      step_pooling(std::move(sched), outputs);
      return outputs;
    }
    const double t_sched = monotonic_seconds();
    for (auto& s : sched.scheduled)
      if (s.req->first_scheduled_time < 0) s.req->first_scheduled_time = t_sched;
    profile_.mark(StepProfile::kSchedule);
    cur.built = build_step_input(sched, scheduler_.config().block_size);
    const auto& eos = scheduler_.config().eos_token_ids;
    const SamplingBatch batch =
        build_sampling_batch(sched, cur.built, eos, rng_, /*pending_tokens=*/0, runner_.model().config().vocab_size,
                             /*defer_masks=*/true);
    cur.sched = std::move(sched);
    profile_.mark(StepProfile::kBuild);
    try {
      cur.ticket = runner_.launch(cur.built, batch, /*tokens_from_last=*/false);
    } catch (const std::exception& e) {
      fail_step(cur.sched, e, outputs);
      return outputs;
    }
  }
  const SchedulerOutput& sched = cur.sched;
  const BuiltStep& built = cur.built;
  try {
    // Async scheduling: the next decode step goes to the device before this one's tokens come back,
    // so the GPU does not idle while the host processes them.
    if (cfg_.async_scheduling) {
      try {
        launch_continuation(cur);
      } catch (const std::exception& e) {
        log_warn("async scheduling: next step not launched ahead: {}", e.what());
      }
    }
    runner_.finish(cur.ticket, built, sampled_);
  } catch (const std::exception& e) {
    inflight_.reset();  // its requests are this step's, failed below
    runner_.discard_launched();
    fail_step(sched, e, outputs);
    return outputs;
  }
  profile_.mark(StepProfile::kForward);

  // Tokens and logprobs per scheduled request (with drafts: one a row, in order); prompt-logprob rows
  // fill the request's list.
  std::vector<std::optional<int32_t>> sampled(sched.scheduled.size());
  std::vector<std::vector<int32_t>> draft_samples;  // only when some request ran drafts
  std::vector<std::vector<TokenLogprob>> token_lps(sched.scheduled.size());
  for (size_t r = 0; r < built.rows.size(); ++r) {
    const LogitsRowInfo& row = built.rows[r];
    Request& req = *sched.scheduled[row.sched_index].req;
    if (row.prompt_pos >= 0) {
      if (req.prompt_logprobs.empty()) req.prompt_logprobs.resize(req.num_prompt_tokens());
      req.prompt_logprobs[row.prompt_pos + 1] = sampled_logprob(sampled_, r, *req.params.prompt_logprobs);
      continue;
    }
    if (row.spec_index == 0) {
      sampled[row.sched_index] = sampled_.tokens[r];
    } else {
      draft_samples.resize(sched.scheduled.size());
      draft_samples[row.sched_index].push_back(sampled_.tokens[r]);
    }
    if (req.params.logprobs) token_lps[row.sched_index].push_back(sampled_logprob(sampled_, r, *req.params.logprobs));
  }

  // Index of each scheduled request, to find its logprobs after update_from_output.
  std::unordered_map<const Request*, size_t> index;
  for (size_t i = 0; i < sched.scheduled.size(); ++i) index[sched.scheduled[i].req.get()] = i;

  auto updates = scheduler_.update_from_output(sched, sampled, draft_samples);
  auto deferred_error = launch_deferred_sampling();  // before the outputs' host work: the GPU waits less
  profile_.mark(StepProfile::kUpdate);
  const double now = monotonic_seconds();
  for (auto& u : updates) {
    Request& req = *u.req;
    metrics_.generation_tokens_total += u.new_token_ids.size();
    if (req.first_token_time < 0) {
      req.first_token_time = now;
      metrics_.prompt_tokens_total += req.num_prompt_tokens();
      metrics_.ttft.observe(now - req.arrival_time);
    } else {
      metrics_.itl.observe(now - req.last_token_time);
    }
    req.last_token_time = now;

    std::vector<TokenLogprob>& lps = token_lps[index[&req]];
    lps.resize(std::min(lps.size(), u.new_token_ids.size()));  // the rows of rejected drafts' successors go
    if (u.num_draft_tokens > 0) {
      ++metrics_.spec_num_drafts;
      metrics_.spec_num_draft_tokens += u.num_draft_tokens;
      metrics_.spec_num_accepted_tokens += u.num_accepted_tokens;
      for (int j = 0; j < u.num_accepted_tokens && j < static_cast<int>(metrics_.spec_accepted_per_pos.size()); ++j)
        ++metrics_.spec_accepted_per_pos[j];
    }
    auto it = states_.find(req.request_id);
    if (it == states_.end()) continue;
    RequestOutput out = it->second->process(req, u.new_token_ids, std::move(lps));
    req.prompt_logprobs_sent = true;
    if (!u.finished && it->second->stopped_by_string()) {
      scheduler_.finish_request(req.request_id, FinishReason::kStop);
      u.finished = true;
    }
    if (u.finished) {
      on_finished(req, now);
      states_.erase(it);
    } else if (cfg_.speculative.enabled()) {
      propose_drafts(req);
    }
    outputs.push_back(std::move(out));
  }
  // Its requests finish with "error" after this step's outputs (those still running: the others
  // finished above).
  if (deferred_error) fail_step(deferred_error->first, Error(deferred_error->second), outputs);
  profile_.mark(StepProfile::kOutputs);
  profile_.end(static_cast<int>(built.rows.size()));
  return outputs;
}

void EngineCore::fill_stats(EngineStats& s) const {
  const auto& kv = scheduler_.kv();
  s.num_requests_running = scheduler_.num_running();
  s.num_requests_waiting = scheduler_.num_waiting();
  s.kv_cache_usage = kv.usage();
  s.num_free_blocks = kv.num_free_blocks();
  s.num_total_blocks = kv.num_total_blocks();
  s.prefix_cache_queries = kv.prefix_cache_queries();
  s.prefix_cache_hits = kv.prefix_cache_hits();
  s.prompt_tokens_total = metrics_.prompt_tokens_total;
  s.generation_tokens_total = metrics_.generation_tokens_total;
  s.num_preemptions_total = scheduler_.num_preemptions();
  s.request_success_total = metrics_.request_success_total;
  s.time_to_first_token_seconds = metrics_.ttft;
  s.inter_token_latency_seconds = metrics_.itl;
  s.e2e_request_latency_seconds = metrics_.e2e;
  s.spec_enabled = cfg_.speculative.enabled();
  s.spec_num_drafts = metrics_.spec_num_drafts;
  s.spec_num_draft_tokens = metrics_.spec_num_draft_tokens;
  s.spec_num_accepted_tokens = metrics_.spec_num_accepted_tokens;
  s.spec_accepted_per_pos = metrics_.spec_accepted_per_pos;
  s.max_loras = cfg_.scheduler.max_loras;
  if (s.max_loras > 0) {  // fill_stats runs every step: the queues are walked only with LoRA on
    s.running_lora_ids = scheduler_.lora_ids(true);
    s.waiting_lora_ids = scheduler_.lora_ids(false);
  }
}

}  // namespace vireo
