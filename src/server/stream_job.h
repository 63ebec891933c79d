// Runs a ChoiceGroup to the end on behalf of one HTTP request, either collecting everything
// (non-streaming) or writing SSE chunks as outputs arrive (streaming). Both watch for the client
// going away and then abort the engine requests.
#pragma once
#include <httplib.h>

#include <atomic>
#include <memory>
#include <optional>
#include <vector>

#include "server/choice_group.h"
#include "server/connection_probe.h"
#include "server/json_fields.h"
#include "server/openai_errors.h"
#include "server/sse_writer.h"

namespace vireo::server {

// Counts a generation handler or stream as active while alive (shutdown waits for zero).
class ActiveJob {
 public:
  explicit ActiveJob(ServerContext& ctx) : ctx_(ctx) { ++ctx_.active_jobs; }
  ~ActiveJob() { --ctx_.active_jobs; }
  ActiveJob(const ActiveJob&) = delete;
  ActiveJob& operator=(const ActiveJob&) = delete;

 private:
  ServerContext& ctx_;
};

// Counts a generation handler in ctx.num_starting until it returns, or, once handed to a
// stream (release()), until the stream's writer starts. Refuses the request (503) if the
// server began draining: checked after counting, so shutdown either waits for it or it sees
// the flag.
class StartingGuard {
 public:
  explicit StartingGuard(ServerContext& ctx) : ctx_(ctx) {
    ++ctx_.num_starting;
    if (ctx_.draining) {
      --ctx_.num_starting;
      throw ApiError(503, "ServiceUnavailableError", "The server is shutting down");
    }
  }
  ~StartingGuard() {
    if (owned_) --ctx_.num_starting;
  }
  void release() { owned_ = false; }
  void finish_now() {
    if (owned_) --ctx_.num_starting;
    owned_ = false;
  }
  StartingGuard(const StartingGuard&) = delete;
  StartingGuard& operator=(const StartingGuard&) = delete;

 private:
  ServerContext& ctx_;
  bool owned_ = true;
};

// Endpoint-specific chunk shapes.
class StreamFormatter {
 public:
  virtual ~StreamFormatter() = default;
  virtual std::vector<Json> start(const ChoiceGroup& group) { return {}; }
  // Whether start()'s chunks wait for the engine's first output (sent just before it), instead of going
  // out as soon as the stream opens. An error before any output is then the stream's first event.
  virtual bool start_with_first_output() const { return false; }
  virtual std::vector<Json> on_output(const ChoiceState& choice, const RequestOutput& out) = 0;
  virtual std::optional<Json> final_chunk(const ChoiceGroup& group) = 0;  // usage, when asked for
  // SSE framing: completions and chat send "data: {json}" only; the Responses API also names each
  // event ("event: <type>") and does not end with [DONE].
  virtual std::string sse(const Json& chunk) const { return sse_event(chunk); }
  virtual bool ends_with_done() const { return true; }
  // What a stream sends when a choice fails mid-way (chat: the error envelope).
  virtual std::vector<Json> on_error(const ApiError& err) { return {error_json(err)}; }
};

// Non-streaming: waits until every choice finished. Returns false if the client went away
// (the unfinished choices are aborted). Throws ApiError when a choice ended in "error" or "abort".
bool collect_all(ServerContext& ctx, ChoiceGroup& group, const ConnectionProbe& probe);

// The ApiError for a choice that finished with "abort" / "error" (nullopt otherwise).
std::optional<ApiError> choice_failure(const ServerContext& ctx, const ChoiceState& c);

struct StreamJob {
  StreamJob(ServerContext& ctx, std::shared_ptr<AsyncEngine> engine, std::unique_ptr<ChoiceGroup> group,
            std::unique_ptr<StreamFormatter> formatter, ConnectionProbe probe)
      : ctx(ctx), active(ctx), engine(std::move(engine)), group(std::move(group)),
        formatter(std::move(formatter)), probe(std::move(probe)) {}
  ServerContext& ctx;
  ActiveJob active;
  std::shared_ptr<AsyncEngine> engine;  // keeps the tokenizer alive for the formatter
  std::unique_ptr<ChoiceGroup> group;
  std::unique_ptr<StreamFormatter> formatter;
  ConnectionProbe probe;
  std::atomic<bool> starting{false};  // holds one count of ctx.num_starting until the writer runs
  void mark_started() {
    if (starting.exchange(false)) --ctx.num_starting;
  }
};

// Makes `res` an SSE response that the job fills; takes over the handler's StartingGuard.
void install_stream(httplib::Response& res, std::shared_ptr<StreamJob> job, StartingGuard& guard);

}  // namespace vireo::server
