// Runs a ChoiceGroup to the end on behalf of one HTTP request, either collecting everything
// (non-streaming) or writing SSE chunks as outputs arrive (streaming). Both watch for the client
// going away and then abort the engine requests.
#pragma once
#include <httplib.h>

#include <memory>
#include <optional>
#include <vector>

#include "server/choice_group.h"
#include "server/connection_probe.h"
#include "server/json_fields.h"
#include "server/openai_errors.h"

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

// Endpoint-specific chunk shapes.
class StreamFormatter {
 public:
  virtual ~StreamFormatter() = default;
  virtual std::vector<Json> start(const ChoiceGroup& group) { return {}; }
  virtual std::vector<Json> on_output(const ChoiceState& choice, const RequestOutput& out) = 0;
  virtual std::optional<Json> final_chunk(const ChoiceGroup& group) = 0;  // usage, when asked for
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
};

// Makes `res` an SSE response that the job fills.
void install_stream(httplib::Response& res, std::shared_ptr<StreamJob> job);

}  // namespace vireo::server
