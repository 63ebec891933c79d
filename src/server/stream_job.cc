#include "server/stream_job.h"

#include <utility>

#include "server/sse_writer.h"

namespace vireo::server {

using namespace std::chrono_literals;

std::optional<ApiError> choice_failure(const ServerContext& ctx, const ChoiceState& c) {
  if (c.finish_reason == "error") {
    // The request's own input (a grammar whose masks the engine could not make): answered as a grammar
    // refused at compile time.
    if (c.error_from_request) return ApiError(400, "BadRequestError", c.error);
    return ApiError(500, "InternalServerError", c.error.empty() ? "the engine failed on this request" : c.error);
  }
  if (c.finish_reason == "abort") {
    if (ctx.aborting_all) return ApiError(503, "ServiceUnavailableError", "The server is shutting down; the request was aborted");
    return ApiError(500, "InternalServerError", "The request was aborted by the engine");
  }
  return std::nullopt;
}

bool collect_all(ServerContext& ctx, ChoiceGroup& group, const ConnectionProbe& probe) {
  while (!group.all_finished()) {
    auto out = group.next(100ms);
    if (probe.client_closed()) {
      group.abort_unfinished();
      return false;
    }
    if (out) {
      if (auto err = choice_failure(ctx, group.choices()[out->first])) {
        group.abort_unfinished();
        throw *err;
      }
    }
  }
  return true;
}

namespace {

// Returns false when the client went away (and the provider should fail the connection).
bool run_stream(StreamJob& job, httplib::DataSink& sink) {
  job.mark_started();
  SseWriter w(sink.write);
  StreamFormatter& fmt = *job.formatter;
  auto send = [&](const Json& chunk) { return w.raw(fmt.sse(chunk)); };
  auto fail = [&] {
    job.group->abort_unfinished();
    return false;
  };
  bool started = false;
  auto start = [&] {
    if (std::exchange(started, true)) return true;
    for (const Json& c : fmt.start(*job.group))
      if (!send(c)) return false;
    return true;
  };
  if (!fmt.start_with_first_output() && !start()) return fail();
  while (!job.group->all_finished()) {
    auto out = job.group->next(100ms);
    if (!out) {
      if (job.probe.client_closed()) return fail();
      continue;
    }
    const ChoiceState& c = job.group->choices()[out->first];
    if (auto err = choice_failure(job.ctx, c)) {
      // vLLM: an error event, then [DONE]; the other choices stop too.
      job.group->abort_unfinished();
      for (const Json& e : fmt.on_error(*err)) send(e);
      if (fmt.ends_with_done()) w.done();
      sink.done();
      return true;
    }
    if (!start()) return fail();
    for (const Json& chunk : fmt.on_output(c, out->second))
      if (!send(chunk)) return fail();
  }
  if (!start()) return fail();
  if (auto last = fmt.final_chunk(*job.group))
    if (!send(*last)) return fail();
  if (fmt.ends_with_done() && !w.done()) return fail();
  sink.done();
  return true;
}

}  // namespace

void install_stream(httplib::Response& res, std::shared_ptr<StreamJob> job, StartingGuard& guard) {
  job->starting = true;
  guard.release();
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [job](size_t, httplib::DataSink& sink) { return run_stream(*job, sink); },
      [job](bool) {
        job->mark_started();
        job->group->abort_unfinished();
      });
}

}  // namespace vireo::server
