#include "server/sse_writer.h"

namespace vireo::server {

std::string sse_event(const Json& chunk) { return "data: " + dump_json(chunk) + "\n\n"; }

std::string sse_done() { return "data: [DONE]\n\n"; }

}  // namespace vireo::server
