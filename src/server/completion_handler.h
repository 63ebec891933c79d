// POST /v1/completions and POST /v1/chat/completions.
#pragma once
#include <httplib.h>

#include "server/chat_prompt.h"  // render_chat, used by /tokenize
#include "server/server_context.h"

namespace vireo::server {

void handle_completions(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_chat_completions(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);

}  // namespace vireo::server
