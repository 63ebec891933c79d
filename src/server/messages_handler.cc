#include "server/messages_handler.h"

#include "server/bad_words.h"
#include "server/chat_output_parser.h"
#include "server/chat_prompt.h"
#include "server/http_util.h"
#include "server/messages_output.h"
#include "server/messages_request.h"
#include "server/messages_stream.h"
#include "server/stream_job.h"
#include "tokenizer/tokenizer.h"

namespace vireo::server {
namespace {

Json plain_message(const MessagesRequest& r, const ChatParsing& parsing, const ChoiceState& c, const std::string& id,
                   int num_prompt_tokens) {
  ChatDelta parsed;
  if (parsing.active()) parsed = parsing.make()->parse_all(c.text);
  else parsed.content = c.text;
  return message_object(id, r.chat.model, messages_content_blocks(parsed),
                        messages_stop_reason(c, !parsed.calls.empty()), messages_stop_sequence(c),
                        messages_usage_json(num_prompt_tokens, c.num_output_tokens));
}

}  // namespace

void handle_messages(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  ActiveJob active(ctx);
  StartingGuard starting(ctx);
  auto engine = ctx.engine();
  ModelInfo info = ctx.model_info();
  Json body = parse_json_body(req);
  MessagesRequest r = parse_messages_request(body, info, ctx.options().limits);
  std::vector<int32_t> ids;
  ChatParsing parsing;
  try {
    parsing = chat_parsing_for(ctx.options(), r.chat);
    ids = prepare_chat_prompt(*engine, r.chat, info);
  } catch (const ApiError& e) {
    throw as_messages_error(e);
  }
  const Tokenizer& tok = engine->tokenizer();
  r.chat.params.bad_words_token_ids = tokenize_bad_words(r.chat.params.bad_words, tok, info.vocab_size);
  const int num_prompt = static_cast<int>(ids.size());
  const std::string id = new_message_id();
  auto group = std::make_unique<ChoiceGroup>(ctx, engine, id);
  group->add_prompt(0, ids, r.chat.params);
  ConnectionProbe probe(req.local_port, req.remote_addr, req.remote_port);
  if (r.chat.stream) {
    auto fmt = std::make_unique<MessagesStreamFormatter>(parsing, id, r.chat.model, num_prompt);
    install_stream(res, std::make_shared<StreamJob>(ctx, engine, std::move(group), std::move(fmt), std::move(probe)), starting);
    return;
  }
  starting.finish_now();  // a plain response is not cut short by the listener stopping
  if (!collect_all(ctx, *group, probe)) return;
  send_json(res, 200, plain_message(r, parsing, group->choices().at(0), id, num_prompt));
}

void handle_count_tokens(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  auto engine = ctx.engine();
  ModelInfo info = ctx.model_info();
  Json body = parse_json_body(req);
  MessagesRequest r = parse_messages_request(body, info, ctx.options().limits, /*count_tokens=*/true);
  std::string text;
  try {
    text = render_chat(*engine, r.chat);
  } catch (const ApiError& e) {
    throw as_messages_error(e);
  }
  const int64_t n = static_cast<int64_t>(engine->tokenizer().encode(text, /*add_special_tokens=*/false).size());
  send_json(res, 200, {{"input_tokens", n}, {"context_management", {{"original_input_tokens", n}}}});
}

}  // namespace vireo::server
