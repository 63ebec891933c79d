// POST /v1/messages (Anthropic's Messages API, as vLLM serves it since 0.11, so Anthropic SDK clients
// such as Claude Code can point at Vireo): the body becomes a chat request (messages_request.h) and runs
// the chat path (template, reasoning and tool parsers, structured outputs, engine); the output is shaped
// as an Anthropic Message or its typed stream events. Errors use Anthropic's envelope
// (openai_errors.h: anthropic_error_json).
#pragma once
#include <httplib.h>

#include "server/server_context.h"

namespace vireo::server {

void handle_messages(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
// POST /v1/messages/count_tokens: {"input_tokens": N}, the rendered prompt's length (system, messages
// and tools as /v1/messages would render them).
void handle_count_tokens(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);

}  // namespace vireo::server
