// POST /invocations: SageMaker's one inference route, as vLLM serves it: the body's shape picks the
// OpenAI route that handles it (chat, completions; with --runner pooling: embeddings, score, rerank).
#pragma once
#include <httplib.h>

#include "server/server_context.h"

namespace vireo::server {

void handle_invocations(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);

}  // namespace vireo::server
