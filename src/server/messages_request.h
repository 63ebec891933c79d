// POST /v1/messages (Anthropic's Messages API, as vLLM serves it) -> the chat request it stands for.
// The Anthropic body is checked for what only it has (content blocks, tool_use / tool_result, system,
// custom tools with input_schema, tool_choice any / tool, thinking, output_config), then rewritten as
// a /v1/chat/completions body and validated by parse_chat_request, so both endpoints share one set of
// sampling, tool_choice and structured-output rules:
//   system (string or text blocks)          -> a leading system message
//   user text / image blocks                -> a user message (text joined by newlines)
//   user tool_result blocks                 -> tool messages (tool_call_id = tool_use_id), before the text
//   assistant text / thinking / tool_use    -> an assistant message with content, reasoning, tool_calls
//   a final assistant text message          -> continue_final_message (Anthropic's prefill: the answer
//                                              continues it; its text is not repeated in the response)
//   max_tokens (required), stop_sequences   -> max_completion_tokens, stop
//   tools [{name, description, input_schema}] -> function tools; tool_choice auto / any / tool / none
//                                              -> auto / required / named / none
//   thinking {type: enabled | disabled}     -> chat_template_kwargs.enable_thinking (Qwen3's switch)
//   output_config.format json_schema        -> response_format json_schema
#pragma once
#include <string>

#include "server/json_fields.h"
#include "server/openai_errors.h"
#include "server/request_types.h"

namespace vireo::server {

struct MessagesRequest {
  ChatRequest chat;
};

// The chat-completions body an Anthropic Messages body stands for. `count_tokens`: the
// /v1/messages/count_tokens form (no max_tokens, no sampling). Throws ApiError 400 naming the field.
Json messages_to_chat_body(const Json& body, bool count_tokens = false);

// messages_to_chat_body + parse_chat_request, with the chat parser's param names mapped back
// (max_completion_tokens -> max_tokens, stop -> stop_sequences, response_format -> output_config).
MessagesRequest parse_messages_request(const Json& body, const ModelInfo& model, const ValidationLimits& limits,
                                       bool count_tokens = false);

// An error from the shared chat path with its param renamed as the Messages body names it.
ApiError as_messages_error(const ApiError& e);

}  // namespace vireo::server
