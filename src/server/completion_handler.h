// POST /v1/completions and POST /v1/chat/completions.
#pragma once
#include <httplib.h>

#include "server/server_context.h"

namespace vireo::server {

void handle_completions(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_chat_completions(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);

// The engine's chat template applied to a validated request's messages, tools, kwargs and prompt
// flags (400 when there is none or it raises).
std::string render_chat(const AsyncEngine& engine, const ChatRequest& r);

}  // namespace vireo::server
