// POST /v1/embeddings (OpenAI's embeddings.create, as vLLM serves pooling models: --runner pooling).
#pragma once
#include <httplib.h>

#include "server/server_context.h"

namespace vireo::server {

void handle_embeddings(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);

}  // namespace vireo::server
