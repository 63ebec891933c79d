// Streaming /v1/responses: OpenAI's typed SSE events ("event: <type>" and "data: <json>", each with
// a sequence_number) instead of chat chunks. response.created and response.in_progress open the
// stream; each output item is announced (response.output_item.added), filled (reasoning_text /
// output_text / function_call_arguments deltas) and closed (*.done, response.output_item.done)
// before the next one opens; response.completed carries the whole response object. The text goes
// through the same reasoning / tool-call parsers as chat, so the items equal the plain response's.
#pragma once
#include <functional>
#include <memory>
#include <string>

#include "server/chat_output_parser.h"
#include "server/responses_request.h"
#include "server/stream_job.h"

namespace vireo {
class Tokenizer;
}

namespace vireo::server {

class ResponsesStreamFormatter : public StreamFormatter {
 public:
  // on_complete gets the output items once the response finished (to store it).
  ResponsesStreamFormatter(const Tokenizer& tok, ResponsesRequest req, ChatParsing parsing, std::string id,
                           int64_t created_at, int num_prompt_tokens, std::function<void(const Json&)> on_complete);

  std::vector<Json> start(const ChoiceGroup& group) override;
  std::vector<Json> on_output(const ChoiceState& choice, const RequestOutput& out) override;
  std::optional<Json> final_chunk(const ChoiceGroup& group) override { return std::nullopt; }
  std::string sse(const Json& event) const override { return sse_named_event(event); }
  std::vector<Json> on_error(const ApiError& err) override;
  bool ends_with_done() const override { return false; }

 private:
  struct Item {
    bool open = false;
    std::string id;
    int output_index = 0;
    std::string text;
  };
  Json event(const char* type, Json fields);
  void add_reasoning(const std::string& text, std::vector<Json>& out);
  void add_content(const std::string& text, std::vector<Json>& out);
  void open_message(std::vector<Json>& out);
  void send_text(const std::string& delta, std::vector<Json>& out);
  void add_call(const ToolCall& call, std::vector<Json>& out);
  void close_reasoning(std::vector<Json>& out);
  void close_message(std::vector<Json>& out);
  void close_all(std::vector<Json>& out);
  Json response(const std::string& status, const ChoiceState* finished);  // usage from `finished`

  const Tokenizer& tok_;
  ResponsesRequest req_;
  ChatParsing parsing_;
  std::unique_ptr<ChatOutputParser> parser_;  // null: the text is all content
  std::string id_;
  int64_t created_at_;
  int num_prompt_tokens_;
  int sequence_number_ = 0;
  int next_output_index_ = 0;
  const char* item_status_ = "completed";
  Item reasoning_, message_;
  std::string held_blank_;            // leading whitespace of the content: dropped if only calls follow
  Json held_logprobs_ = Json::array();  // logprobs of text not yet sent
  Json message_logprobs_ = Json::array();
  bool has_calls_ = false;
  Json output_ = Json::array();       // closed items, in output_index order
  std::function<void(const Json&)> on_complete_;
};

}  // namespace vireo::server
