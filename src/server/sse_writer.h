// Server-sent events as the OpenAI streaming API sends them: "data: {json}\n\n" per chunk and a
// final "data: [DONE]\n\n".
#pragma once
#include <functional>
#include <string>

#include "server/json_fields.h"

namespace vireo::server {

std::string sse_event(const Json& chunk);
std::string sse_done();
// "event: <type>\ndata: {json}\n\n", the type read from the event's own "type" (the Responses and Messages APIs).
std::string sse_named_event(const Json& event);

// Writes events to a sink; remembers the first failed write (the client went away).
class SseWriter {
 public:
  using WriteFn = std::function<bool(const char*, size_t)>;
  explicit SseWriter(WriteFn write) : write_(std::move(write)) {}
  bool send(const Json& chunk) { return raw(sse_event(chunk)); }
  bool done() { return raw(sse_done()); }
  bool ok() const { return ok_; }
  // An event already framed (StreamFormatter::sse).
  bool raw(const std::string& s) {
    if (ok_ && !write_(s.data(), s.size())) ok_ = false;
    return ok_;
  }

 private:
  WriteFn write_;
  bool ok_ = true;
};

}  // namespace vireo::server
