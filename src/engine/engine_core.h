// The synchronous engine: schedule -> build inputs -> forward + sample (on the model's device)
// -> update -> outputs.
// Single-threaded; AsyncEngine drives it from its background thread, tests drive it directly.
#pragma once
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/engine_stats.h"
#include "engine/model_runner.h"
#include "engine/output_processor.h"
#include "engine/request_output.h"
#include "engine/scheduler.h"
#include "engine/speculative_config.h"
#include "engine/step_input_builder.h"
#include "engine/step_profile.h"
#include "structured/vocab_index.h"

namespace vireo {

class Tokenizer;

struct EngineCoreConfig {
  SchedulerConfig scheduler;
  uint64_t seed = 0;  // the engine RNG for unseeded requests
  // vLLM's --async-scheduling: decode steps are issued one step ahead (Scheduler::schedule_continuation),
  // their input tokens taken from the previous step's samples on the device; the host handles step N's
  // outputs while the GPU runs step N + 1. A request that stops at step N wastes its row of step N + 1.
  bool async_scheduling = false;
  // Pooling (--runner pooling): requests run their prompt only and finish with an embedding
  // (engine_core_pooling.cc) instead of generating.
  PoolingSpec pooling;
  // --speculative-config: n-gram drafts (requires async_scheduling off: a step's inputs depend on how
  // many drafts the previous one kept).
  SpeculativeConfig speculative;
};

// Counters and latency histograms with vLLM's bucket bounds.
struct EngineMetrics {
  EngineMetrics();
  uint64_t prompt_tokens_total = 0;
  uint64_t generation_tokens_total = 0;
  uint64_t request_success_total = 0;
  Histogram ttft, itl, e2e;
  // Speculative decoding (vLLM's vllm:spec_decode_* counters): requests x steps that ran drafts, the
  // drafts, the kept ones, and the kept ones by draft position.
  uint64_t spec_num_drafts = 0, spec_num_draft_tokens = 0, spec_num_accepted_tokens = 0;
  std::vector<uint64_t> spec_accepted_per_pos;
};

class EngineCore {
 public:
  // tok may be null: outputs then carry token ids only.
  EngineCore(std::unique_ptr<Model> model, const Tokenizer* tok, const EngineCoreConfig& cfg);
  ~EngineCore();

  void add_request(std::shared_ptr<Request> req);
  // Finishes the request with "abort"; its final output is returned by the next step().
  void abort_request(const std::string& id);
  // One step; returns an output for every request that made progress or finished.
  std::vector<RequestOutput> step();
  // Finishes every request with "error" (after an unexpected failure of the step loop).
  std::vector<RequestOutput> fail_all(const std::string& message);
  bool has_unfinished() const {
    return scheduler_.has_unfinished() || !pending_outputs_.empty() || inflight_.has_value();
  }

  Scheduler& scheduler() { return scheduler_; }
  const Scheduler& scheduler() const { return scheduler_; }
  const EngineMetrics& metrics() const { return metrics_; }
  // Async scheduling: steps launched before the previous step's tokens were back.
  uint64_t num_steps_launched_ahead() const { return num_launched_ahead_; }
  // Of those, the ones with grammar rows, whose sampling was launched after the previous step's tokens.
  uint64_t num_steps_sampled_late() const { return num_sampled_late_; }
  void fill_stats(EngineStats& s) const;
  ModelRunner& runner() { return runner_; }

 private:
  // A step whose forward and sampling were issued; its results come from runner_.finish(ticket).
  struct LaunchedStep {
    SchedulerOutput sched;
    BuiltStep built;
    int ticket = 0;
    // A continuation with grammar rows: only its forward is issued; its sampling is launched by
    // launch_deferred_sampling once the step before it has advanced the matchers.
    bool sampling_deferred = false;
  };
  void on_finished(const Request& req, double now);
  // A pooling step (cfg_.pooling.enabled): prompt chunks through Model::forward_hidden; requests whose
  // prompt is done finish with their embedding.
  void step_pooling(SchedulerOutput sched, std::vector<RequestOutput>& outputs);
  void fail_step(const SchedulerOutput& sched, const std::exception& e, std::vector<RequestOutput>& outputs);
  void launch_continuation(const LaunchedStep& cur);
  // Returns the continuation's schedule and error if its sampling could not be launched (it is dropped).
  std::optional<std::pair<SchedulerOutput, std::string>> launch_deferred_sampling();
  RequestOutput final_output_without_tokens(const Request& req);
  // Speculative decoding: the next step's drafts of a request that just got tokens (none for requests
  // whose sampling depends on their previous tokens: penalties, grammars, bad words of several tokens).
  void propose_drafts(Request& req);
  // The request's grammar matcher over the tokenizer's vocabulary (built on first use).
  std::unique_ptr<structured::GrammarMatcher> make_matcher(const Request& req);

  EngineCoreConfig cfg_;
  const Tokenizer* tok_;
  Scheduler scheduler_;
  ModelRunner runner_;
  std::mt19937_64 rng_;
  std::unordered_map<std::string, std::unique_ptr<RequestOutputState>> states_;
  std::vector<RequestOutput> pending_outputs_;  // aborts since the last step
  EngineMetrics metrics_;
  SampledRows sampled_;  // the last step's tokens and logprobs (reused buffers)
  std::optional<LaunchedStep> inflight_;  // async scheduling: the step launched ahead
  uint64_t num_launched_ahead_ = 0;
  uint64_t num_sampled_late_ = 0;
  StepProfile profile_;
  std::shared_ptr<const structured::VocabIndex> vocab_index_;  // structured outputs, built on first use
};

double monotonic_seconds();

}  // namespace vireo
