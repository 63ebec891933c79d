// OpenAI shapes for parsed chat output. Reasoning goes out under both names: vLLM sent
// `reasoning_content` until 0.10, both after its PR #27752 (0.11.x), and only `reasoning` after
// PR #33402 (2026); clients read one or the other, so both serve every client.
#pragma once
#include "server/chat_output_parser.h"
#include "server/json_fields.h"

namespace vireo::server {

// "chatcmpl-tool-<32 hex>", as vLLM names calls.
std::string new_tool_call_id();

// The non-streaming choice's "message". With parsing active an empty content is null, and so is
// a whitespace-only one beside tool calls (the newlines around <tool_call> blocks).
Json chat_message_json(const ChatDelta& all, bool parsing_active);

// A streaming "delta" (no role): only the parts that are non-empty; each call gets the next
// index of its choice (num_calls_sent counts them).
Json chat_delta_json(const ChatDelta& d, int& num_calls_sent);

}  // namespace vireo::server
