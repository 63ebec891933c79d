// Responses `input` (a string or a list of items) -> chat `messages`. Message items keep their role
// (user, system, developer, assistant) with text parts joined by newlines, as chat content parts are;
// function_call items become assistant tool_calls (consecutive ones, and one right after an
// assistant message, share that message, as one chat turn holds text and parallel calls), and
// function_call_output items become tool messages. Reasoning items from an earlier output are
// dropped: chat templates drop the reasoning of past turns anyway.
#pragma once
#include "server/json_fields.h"

namespace vireo::server {

// `instructions` (null or a string) becomes a leading system message. Throws ApiError 400 (param
// "input") naming the item at fault.
Json responses_input_to_messages(const Json& input, const Json& instructions);

}  // namespace vireo::server
