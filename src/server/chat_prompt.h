// A validated chat request -> the prompt the engine sees. Shared by /v1/chat/completions,
// /v1/responses (a chat request underneath) and /tokenize.
#pragma once
#include <string>
#include <vector>

#include "engine/async_engine.h"
#include "server/request_types.h"

namespace vireo::server {

// The engine's chat template applied to a validated request's messages, tools, kwargs and prompt
// flags (400 when there is none or it raises).
std::string render_chat(const AsyncEngine& engine, const ChatRequest& r);

// render_chat, tokenized without adding special tokens again (vLLM: the template placed them),
// cut to truncate_prompt_tokens when the request set it, checked against the context; sets r.params.max_tokens (the rest of the context unless the request
// gave one) and caps min_tokens there. 400 naming "messages" / "max_tokens" when it does not fit.
std::vector<int32_t> prepare_chat_prompt(const AsyncEngine& engine, ChatRequest& r, const ModelInfo& info);

}  // namespace vireo::server
