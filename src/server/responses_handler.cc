#include "server/responses_handler.h"

#include "server/chat_output_parser.h"
#include "server/chat_prompt.h"
#include "server/http_util.h"
#include "server/logprobs_format.h"
#include "server/responses_output.h"
#include "server/responses_request.h"
#include "server/responses_store.h"
#include "server/responses_stream.h"
#include "server/stream_job.h"
#include "tokenizer/tokenizer.h"

namespace vireo::server {
namespace {

Json plain_response(const Tokenizer& tok, const ResponsesRequest& r, const ChatParsing& parsing, const ChoiceState& c,
                    const std::string& id, int64_t created_at, int num_prompt_tokens) {
  ChatDelta parsed;
  if (parsing.active()) parsed = parsing.make()->parse_all(c.text);
  else parsed.content = c.text;
  Json logprobs = Json::array();
  if (r.output_logprobs)
    for (const auto& e : c.logprobs) logprobs.push_back(chat_logprob_entry(tok, e, r.top_logprobs));
  const bool incomplete = c.finish_reason == "length";
  return response_object(r, id, created_at, incomplete ? "incomplete" : "completed",
                         responses_output_items(parsed, logprobs, incomplete),
                         responses_usage_json(num_prompt_tokens, c.num_output_tokens, c.num_cached_tokens));
}

}  // namespace

void handle_responses(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  ActiveJob active(ctx);
  StartingGuard starting(ctx);
  auto engine = ctx.engine();
  ModelInfo info = ctx.model_info();
  Json body = parse_json_body(req);
  ResponsesStore& store = ctx.responses_store();
  Json previous_id = continue_previous_response(store, body);
  ResponsesRequest r = parse_responses_request(body, info, ctx.options().limits);
  r.previous_response_id = previous_id;
  std::vector<int32_t> ids;
  ChatParsing parsing;
  try {
    parsing = chat_parsing_for(ctx.options(), r.chat);
    ids = prepare_chat_prompt(*engine, r.chat, info);
  } catch (const ApiError& e) {
    throw as_responses_error(e);
  }
  const int num_prompt = static_cast<int>(ids.size());
  // OpenAI's ids are "resp_<hex>"; new_id's "resp-<hex>" keeps its uniqueness counter.
  std::string id = ctx.new_id("resp");
  id[4] = '_';
  const int64_t created_at = unix_now();
  auto group = std::make_unique<ChoiceGroup>(ctx, engine, id);
  group->add_prompt(0, ids, r.chat.params);
  ConnectionProbe probe(req.local_port, req.remote_addr, req.remote_port);
  const Tokenizer& tok = engine->tokenizer();
  // Stored (unless store: false) once finished: the conversation so far as input items, then the
  // output; and the Response object itself, for GET /v1/responses/{id}.
  std::function<void(const Json&)> remember;
  if (store.enabled() && get_bool(body, "store").value_or(true))
    remember = [&store, id, history = input_items(body["input"])](const Json& response) {
      Json items = history;
      for (const auto& item : response.value("output", Json::array())) items.push_back(item);
      store.put(id, std::move(items), response);
    };
  if (r.chat.stream) {
    auto fmt = std::make_unique<ResponsesStreamFormatter>(tok, r, parsing, id, created_at, num_prompt, std::move(remember));
    install_stream(res, std::make_shared<StreamJob>(ctx, engine, std::move(group), std::move(fmt), std::move(probe)), starting);
    return;
  }
  starting.finish_now();  // a plain response is not cut short by the listener stopping
  if (!collect_all(ctx, *group, probe)) return;
  Json response = plain_response(tok, r, parsing, group->choices().at(0), id, created_at, num_prompt);
  if (remember) remember(response);
  send_json(res, 200, response);
}

void handle_get_response(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const std::string id = req.matches.size() > 1 ? req.matches[1].str() : std::string();
  std::optional<Json> response = ctx.responses_store().get_response(id);
  if (!response) throw ApiError(404, "NotFoundError", "Response with id '" + id + "' not found.", "response_id");
  send_json(res, 200, *response);
}

}  // namespace vireo::server
