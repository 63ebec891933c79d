// The Messages API's output shapes (Anthropic's Message object, as vLLM's AnthropicMessagesResponse):
// content blocks (thinking, text, tool_use), stop_reason, usage and the message itself. Shared by the
// plain response and the stream's events.
#pragma once
#include <string>

#include "server/chat_output_parser.h"
#include "server/choice_group.h"
#include "server/json_fields.h"

namespace vireo::server {

// end_turn | max_tokens | stop_sequence (a stop string matched) | tool_use (the answer has calls).
std::string messages_stop_reason(const ChoiceState& c, bool has_calls);
// The stop string that ended the answer, else null.
Json messages_stop_sequence(const ChoiceState& c);

Json thinking_block(const std::string& thinking, const std::string& signature);
Json text_block(const std::string& text);
// input: the call's arguments parsed (an object; arguments that are not a JSON object are kept as
// {"arguments": <what was generated>} so a client always gets an object).
Json tool_use_block(const std::string& id, const ToolCall& call);
Json tool_input(const std::string& arguments);

// The blocks of one parsed answer, in order: thinking, text (left out when empty, or blank beside
// tool calls), tool_use.
Json messages_content_blocks(const ChatDelta& parsed);

Json messages_usage_json(int64_t input_tokens, int64_t output_tokens);

// {"id", "type": "message", "role": "assistant", "content", "model", "stop_reason", "stop_sequence", "usage"}.
Json message_object(const std::string& id, const std::string& model, Json content, Json stop_reason, Json stop_sequence,
                    Json usage);

// "msg_<hex>" / "toolu_<hex>" / a thinking block's signature, as Anthropic names them.
std::string new_message_id();
std::string new_tool_use_id();
std::string new_signature();

}  // namespace vireo::server
