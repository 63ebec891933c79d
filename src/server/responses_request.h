// POST /v1/responses request -> the chat request it stands for. The Responses body is checked for
// what only it has (input items, flat function tools, text.format, previous_response_id, ...), then
// rewritten as a /v1/chat/completions body and validated by parse_chat_request, so both endpoints
// share one set of sampling, tool_choice and structured-output rules.
#pragma once
#include <optional>

#include "server/json_fields.h"
#include "server/openai_errors.h"
#include "server/request_types.h"

namespace vireo::server {

struct ResponsesRequest {
  ChatRequest chat;
  // What the response object echoes back, as sent (OpenAI's defaults when absent).
  Json instructions = nullptr;
  Json max_output_tokens = nullptr;
  Json metadata = nullptr;
  Json reasoning = nullptr;
  Json user = nullptr;
  Json temperature = nullptr;  // null: the effective chat.params value is echoed
  Json top_p = nullptr;
  Json tools = Json::array();  // Responses' flat shape
  Json tool_choice = "auto";
  Json text = Json{{"format", {{"type", "text"}}}};
  Json service_tier = "auto";
  Json previous_response_id = nullptr;  // set by the handler (responses_store.h)
  bool parallel_tool_calls = true;
  bool output_logprobs = false;  // include: ["message.output_text.logprobs"]
  int top_logprobs = 0;
};

// The chat-completions body a Responses body stands for. Throws ApiError 400 (param named with the
// Responses field) for malformed input, unsupported tool types, previous_response_id, ...
Json responses_to_chat_body(const Json& body);

// responses_to_chat_body + parse_chat_request, with the chat parser's param names (messages,
// max_completion_tokens, response_format) mapped back to the Responses ones.
ResponsesRequest parse_responses_request(const Json& body, const ModelInfo& model, const ValidationLimits& limits);

// An error raised by the shared chat path, with its param renamed as the Responses body names it
// (messages -> input, max_completion_tokens / max_tokens -> max_output_tokens, response_format -> text).
ApiError as_responses_error(const ApiError& e);

}  // namespace vireo::server
