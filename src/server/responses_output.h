// The Responses API's output shapes (OpenAI's Response object, vLLM's ResponsesResponse): output
// items (reasoning, message, function_call), usage, and the response object that echoes the
// request's settings. Shared by the plain response and the stream's events.
#pragma once
#include <string>

#include "server/chat_output_parser.h"
#include "server/json_fields.h"
#include "server/responses_request.h"

namespace vireo::server {

// "<prefix>_<32 hex>": msg_, fc_, call_, rs_ as OpenAI names items.
std::string new_item_id(const char* prefix);

Json output_text_part(const std::string& text, Json logprobs);
Json message_item(const std::string& id, Json content, const char* status);
Json reasoning_item(const std::string& id, const std::string& text, const char* status);
Json function_call_item(const std::string& id, const std::string& call_id, const ToolCall& call, const char* status);

// True when text is empty or only whitespace (such content beside tool calls is dropped, as chat
// makes it null).
bool blank_text(const std::string& text);

// The items of one parsed answer, in order: reasoning, message, function calls. The message is left
// out when there are calls and its text is blank, or when only reasoning was produced. `incomplete`
// (max_output_tokens) marks the last reasoning / message item incomplete when there are no calls.
Json responses_output_items(const ChatDelta& parsed, const Json& logprobs, bool incomplete);

Json responses_usage_json(int64_t input_tokens, int64_t output_tokens, int64_t cached_tokens);

// status: "in_progress" | "completed" | "incomplete" (the output hit max_output_tokens).
Json response_object(const ResponsesRequest& r, const std::string& id, int64_t created_at, const std::string& status,
                     Json output, Json usage);

}  // namespace vireo::server
