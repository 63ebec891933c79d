#include "server/responses_stream.h"

#include <utility>

#include "server/logprobs_format.h"
#include "server/responses_output.h"

namespace vireo::server {

ResponsesStreamFormatter::ResponsesStreamFormatter(const Tokenizer& tok, ResponsesRequest req, ChatParsing parsing,
                                                   std::string id, int64_t created_at, int num_prompt_tokens,
                                                   std::function<void(const Json&)> on_complete)
    : tok_(tok), req_(std::move(req)), parsing_(std::move(parsing)), id_(std::move(id)), created_at_(created_at),
      num_prompt_tokens_(num_prompt_tokens), on_complete_(std::move(on_complete)) {
  if (parsing_.active()) parser_ = parsing_.make();
}

Json ResponsesStreamFormatter::event(const char* type, Json fields) {
  Json e = {{"type", type}, {"sequence_number", sequence_number_++}};
  e.update(fields);
  return e;
}

std::vector<Json> ResponsesStreamFormatter::on_error(const ApiError& err) {
  return {event("error", {{"code", std::to_string(err.status)}, {"message", err.message},
                          {"param", err.param ? Json(*err.param) : Json(nullptr)}})};
}

Json ResponsesStreamFormatter::response(const std::string& status, const ChoiceState* c) {
  Json usage = c ? responses_usage_json(num_prompt_tokens_, c->num_output_tokens, c->num_cached_tokens) : Json(nullptr);
  return response_object(req_, id_, created_at_, status, output_, std::move(usage));
}

std::vector<Json> ResponsesStreamFormatter::start(const ChoiceGroup&) {
  return {event("response.created", {{"response", response("in_progress", nullptr)}}),
          event("response.in_progress", {{"response", response("in_progress", nullptr)}})};
}

std::vector<Json> ResponsesStreamFormatter::on_output(const ChoiceState& c, const RequestOutput& out) {
  std::vector<Json> events;
  if (req_.output_logprobs)
    for (const auto& lp : out.logprobs) held_logprobs_.push_back(chat_logprob_entry(tok_, lp, req_.top_logprobs));
  ChatDelta d = parse_output_step(parser_.get(), out.text, out.finished);
  // Parsers release reasoning before content before the calls that follow it.
  if (!d.reasoning.empty()) add_reasoning(d.reasoning, events);
  if (!d.content.empty()) add_content(d.content, events);
  for (const auto& call : d.calls) add_call(call, events);
  if (out.finished) {
    const bool incomplete = c.finish_reason == "length";
    if (incomplete) item_status_ = "incomplete";
    close_all(events);
    Json final_response = response(incomplete ? "incomplete" : "completed", &c);
    if (on_complete_) on_complete_(final_response);
    events.push_back(event("response.completed", {{"response", std::move(final_response)}}));
  }
  return events;
}

void ResponsesStreamFormatter::add_reasoning(const std::string& text, std::vector<Json>& out) {
  if (!reasoning_.open) {
    reasoning_ = {true, new_item_id("rs"), next_output_index_++, ""};
    out.push_back(event("response.output_item.added",
                        {{"output_index", reasoning_.output_index}, {"item", reasoning_item(reasoning_.id, "", "in_progress")}}));
    out.push_back(event("response.reasoning_part.added",
                        {{"item_id", reasoning_.id}, {"output_index", reasoning_.output_index}, {"content_index", 0},
                         {"part", {{"type", "reasoning_text"}, {"text", ""}}}}));
  }
  reasoning_.text += text;
  out.push_back(event("response.reasoning_text.delta", {{"item_id", reasoning_.id}, {"output_index", reasoning_.output_index},
                                                        {"content_index", 0}, {"delta", text}}));
}

void ResponsesStreamFormatter::close_reasoning(std::vector<Json>& out) {
  if (!reasoning_.open) return;
  reasoning_.open = false;
  const Json ids = {{"item_id", reasoning_.id}, {"output_index", reasoning_.output_index}, {"content_index", 0}};
  Json done = ids;
  done["text"] = reasoning_.text;
  out.push_back(event("response.reasoning_text.done", done));
  Json part = ids;
  part["part"] = {{"type", "reasoning_text"}, {"text", reasoning_.text}};
  out.push_back(event("response.reasoning_part.done", part));
  Json item = reasoning_item(reasoning_.id, reasoning_.text, item_status_);
  out.push_back(event("response.output_item.done", {{"output_index", reasoning_.output_index}, {"item", item}}));
  output_.push_back(std::move(item));
}

void ResponsesStreamFormatter::open_message(std::vector<Json>& out) {
  message_ = {true, new_item_id("msg"), next_output_index_++, ""};
  out.push_back(event("response.output_item.added",
                      {{"output_index", message_.output_index}, {"item", message_item(message_.id, Json::array(), "in_progress")}}));
  out.push_back(event("response.content_part.added",
                      {{"item_id", message_.id}, {"output_index", message_.output_index}, {"content_index", 0},
                       {"part", output_text_part("", Json::array())}}));
}

void ResponsesStreamFormatter::send_text(const std::string& delta, std::vector<Json>& out) {
  message_.text += delta;
  Json logprobs = std::exchange(held_logprobs_, Json::array());
  for (const auto& e : logprobs) message_logprobs_.push_back(e);
  out.push_back(event("response.output_text.delta", {{"item_id", message_.id}, {"output_index", message_.output_index},
                                                     {"content_index", 0}, {"delta", delta}, {"logprobs", logprobs}}));
}

void ResponsesStreamFormatter::add_content(const std::string& text, std::vector<Json>& out) {
  close_reasoning(out);
  if (message_.open) return send_text(text, out);
  // Whitespace before a tool call is not a message (chat makes such content null): hold it.
  held_blank_ += text;
  if (blank_text(held_blank_)) return;
  open_message(out);
  send_text(std::exchange(held_blank_, std::string()), out);
}

void ResponsesStreamFormatter::close_message(std::vector<Json>& out) {
  if (!message_.open) return;
  message_.open = false;
  for (const auto& e : held_logprobs_) message_logprobs_.push_back(e);
  held_logprobs_ = Json::array();
  const Json ids = {{"item_id", message_.id}, {"output_index", message_.output_index}, {"content_index", 0}};
  Json done = ids;
  done["text"] = message_.text;
  done["logprobs"] = message_logprobs_;
  out.push_back(event("response.output_text.done", done));
  Json part = output_text_part(message_.text, std::exchange(message_logprobs_, Json::array()));
  Json part_done = ids;
  part_done["part"] = part;
  out.push_back(event("response.content_part.done", part_done));
  Json item = message_item(message_.id, Json::array({part}), item_status_);
  out.push_back(event("response.output_item.done", {{"output_index", message_.output_index}, {"item", item}}));
  output_.push_back(std::move(item));
}

void ResponsesStreamFormatter::add_call(const ToolCall& call, std::vector<Json>& out) {
  close_reasoning(out);
  close_message(out);
  has_calls_ = true;
  const std::string id = new_item_id("fc"), call_id = new_item_id("call");
  const int index = next_output_index_++;
  out.push_back(event("response.output_item.added",
                      {{"output_index", index}, {"item", function_call_item(id, call_id, {call.name, ""}, "in_progress")}}));
  out.push_back(event("response.function_call_arguments.delta",
                      {{"item_id", id}, {"output_index", index}, {"delta", call.arguments}}));
  out.push_back(event("response.function_call_arguments.done",
                      {{"item_id", id}, {"output_index", index}, {"name", call.name}, {"arguments", call.arguments}}));
  Json item = function_call_item(id, call_id, call, "completed");
  out.push_back(event("response.output_item.done", {{"output_index", index}, {"item", item}}));
  output_.push_back(std::move(item));
}

void ResponsesStreamFormatter::close_all(std::vector<Json>& out) {
  // As responses_output_items: an answer without calls has a message unless it was all reasoning.
  if (!message_.open && !has_calls_ && (!held_blank_.empty() || (output_.empty() && !reasoning_.open))) {
    open_message(out);
    if (!held_blank_.empty()) send_text(std::exchange(held_blank_, std::string()), out);
  }
  close_reasoning(out);
  close_message(out);
}

}  // namespace vireo::server
