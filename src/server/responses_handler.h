// POST /v1/responses (OpenAI's Responses API, as vLLM serves it for chat models): the body becomes
// a chat request (responses_request.h) and runs the chat path (template, parsers, structured
// outputs, engine); the output is shaped as a Response object or its typed stream events.
#pragma once
#include <httplib.h>

#include "server/server_context.h"

namespace vireo::server {

void handle_responses(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
// GET /v1/responses/{id}: a stored response (store not false, not yet evicted), else 404.
void handle_get_response(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);

}  // namespace vireo::server
