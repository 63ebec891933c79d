#include "server/sse_writer.h"

namespace vireo::server {

std::string sse_event(const Json& chunk) { return "data: " + dump_json(chunk) + "\n\n"; }

std::string sse_done() { return "data: [DONE]\n\n"; }

std::string sse_named_event(const Json& event) {
  return "event: " + event["type"].get<std::string>() + "\ndata: " + dump_json(event) + "\n\n";
}

}  // namespace vireo::server
