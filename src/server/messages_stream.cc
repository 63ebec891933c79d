#include "server/messages_stream.h"

#include <utility>

#include "server/messages_output.h"
#include "server/responses_output.h"

namespace vireo::server {

MessagesStreamFormatter::MessagesStreamFormatter(ChatParsing parsing, std::string id, std::string model,
                                                 int num_prompt_tokens)
    : parsing_(std::move(parsing)), id_(std::move(id)), model_(std::move(model)), num_prompt_tokens_(num_prompt_tokens) {
  if (parsing_.active()) parser_ = parsing_.make();
}

std::vector<Json> MessagesStreamFormatter::on_error(const ApiError& err) { return {anthropic_error_json(err)}; }

Json MessagesStreamFormatter::delta(Json d) const {
  return {{"type", "content_block_delta"}, {"index", index_}, {"delta", std::move(d)}};
}

std::vector<Json> MessagesStreamFormatter::start(const ChoiceGroup&) {
  Json message = message_object(id_, model_, Json::array(), nullptr, nullptr, messages_usage_json(num_prompt_tokens_, 0));
  return {{{"type", "message_start"}, {"message", std::move(message)}}};
}

void MessagesStreamFormatter::open_block(Block kind, Json content_block, std::vector<Json>& out) {
  close_block(out);
  open_ = kind;
  ++index_;
  out.push_back({{"type", "content_block_start"}, {"index", index_}, {"content_block", std::move(content_block)}});
}

void MessagesStreamFormatter::close_block(std::vector<Json>& out) {
  if (open_ == Block::kNone) return;
  // Anthropic closes a thinking block with its signature (clients send it back with the block).
  if (open_ == Block::kThinking) out.push_back(delta({{"type", "signature_delta"}, {"signature", new_signature()}}));
  out.push_back({{"type", "content_block_stop"}, {"index", index_}});
  open_ = Block::kNone;
}

void MessagesStreamFormatter::add_text(const std::string& text, std::vector<Json>& out) {
  if (open_ != Block::kText) {
    // Whitespace before a tool call is no text block (the plain response leaves it out): hold it.
    held_blank_ += text;
    if (blank_text(held_blank_)) return;
    open_block(Block::kText, text_block(""), out);
    out.push_back(delta({{"type", "text_delta"}, {"text", std::exchange(held_blank_, std::string())}}));
    return;
  }
  out.push_back(delta({{"type", "text_delta"}, {"text", text}}));
}

void MessagesStreamFormatter::add_call(const ToolCall& call, std::vector<Json>& out) {
  has_calls_ = true;
  held_blank_.clear();
  open_block(Block::kNone, {{"type", "tool_use"}, {"id", new_tool_use_id()}, {"name", call.name}, {"input", Json::object()}},
             out);
  // The arguments as the object the plain response carries, serialized once.
  out.push_back(delta({{"type", "input_json_delta"}, {"partial_json", dump_json(tool_input(call.arguments))}}));
  out.push_back({{"type", "content_block_stop"}, {"index", index_}});
}

std::vector<Json> MessagesStreamFormatter::on_output(const ChoiceState& c, const RequestOutput& out) {
  std::vector<Json> events;
  ChatDelta d = parse_output_step(parser_.get(), out.text, out.finished);
  // Parsers release reasoning before content before the calls that follow it.
  if (!d.reasoning.empty()) {
    if (open_ != Block::kThinking) open_block(Block::kThinking, thinking_block("", ""), events);
    events.push_back(delta({{"type", "thinking_delta"}, {"thinking", d.reasoning}}));
  }
  if (!d.content.empty()) add_text(d.content, events);
  for (const auto& call : d.calls) add_call(call, events);
  if (!out.finished) return events;
  // Text that was only whitespace, with no call after it, is the answer's text (as the plain response).
  if (!held_blank_.empty() && !has_calls_) {
    open_block(Block::kText, text_block(""), events);
    events.push_back(delta({{"type", "text_delta"}, {"text", std::exchange(held_blank_, std::string())}}));
  }
  close_block(events);
  events.push_back({{"type", "message_delta"},
                    {"delta", {{"stop_reason", messages_stop_reason(c, has_calls_)}, {"stop_sequence", messages_stop_sequence(c)}}},
                    {"usage", messages_usage_json(num_prompt_tokens_, c.num_output_tokens)}});
  events.push_back({{"type", "message_stop"}});
  return events;
}

}  // namespace vireo::server
