// Streaming /v1/messages: Anthropic's typed SSE events ("event: <type>" and "data: <json>"), no [DONE].
// message_start opens the stream (usage.input_tokens known, content empty); each content block is
// opened (content_block_start), filled (thinking_delta / text_delta / input_json_delta) and closed
// (a thinking block's signature_delta, then content_block_stop) before the next opens; message_delta
// carries stop_reason, stop_sequence and usage, and message_stop ends the stream. The text goes
// through the same reasoning / tool-call parsers as chat, so the blocks equal the plain response's.
#pragma once
#include <memory>
#include <string>

#include "server/chat_output_parser.h"
#include "server/stream_job.h"

namespace vireo::server {

class MessagesStreamFormatter : public StreamFormatter {
 public:
  MessagesStreamFormatter(ChatParsing parsing, std::string id, std::string model, int num_prompt_tokens);

  // As chat: message_start goes out with the first token, so a client's time to it is its TTFT.
  bool start_with_first_output() const override { return true; }
  std::vector<Json> start(const ChoiceGroup& group) override;
  std::vector<Json> on_output(const ChoiceState& choice, const RequestOutput& out) override;
  std::optional<Json> final_chunk(const ChoiceGroup&) override { return std::nullopt; }
  std::string sse(const Json& event) const override { return sse_named_event(event); }
  std::vector<Json> on_error(const ApiError& err) override;
  bool ends_with_done() const override { return false; }

 private:
  enum class Block { kNone, kThinking, kText };
  void open_block(Block kind, Json content_block, std::vector<Json>& out);
  void close_block(std::vector<Json>& out);
  void add_text(const std::string& text, std::vector<Json>& out);
  void add_call(const ToolCall& call, std::vector<Json>& out);
  Json delta(Json d) const;

  ChatParsing parsing_;
  std::unique_ptr<ChatOutputParser> parser_;  // null: the text is all content
  std::string id_;
  std::string model_;
  int num_prompt_tokens_;
  Block open_ = Block::kNone;
  int index_ = -1;           // the open (or last) block's index
  std::string held_blank_;   // leading whitespace of the text: dropped if only calls follow
  bool has_calls_ = false;
};

}  // namespace vireo::server
