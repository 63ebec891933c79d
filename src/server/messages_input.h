// Anthropic `system` + `messages` -> chat `messages` (messages_request.h has the whole mapping).
// Content is a string or a list of blocks: text, image (base64 or url, as an image_url part: only
// vision models accept it), thinking / redacted_thinking (the turn's reasoning; redacted is dropped),
// tool_use (assistant) and tool_result (user). Other block types (document, search_result, server
// tool blocks) are refused with a 400 naming the block.
#pragma once
#include "server/json_fields.h"

namespace vireo::server {

// Throws ApiError 400 (param "messages" or "system") naming the message and block at fault.
Json anthropic_messages_to_chat(const Json& messages, const Json& system);

}  // namespace vireo::server
