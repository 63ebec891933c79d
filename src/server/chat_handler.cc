// /v1/chat/completions: messages rendered with the model's chat template, tokenized without
// adding special tokens again (vLLM), then generated like a single completions prompt.
#include <map>

#include "core/error.h"
#include "server/bad_words.h"
#include "server/chat_output_json.h"
#include "server/chat_prompt.h"
#include "server/completion_handler.h"
#include "server/http_util.h"
#include "server/logprobs_format.h"
#include "server/request_validation.h"
#include "server/stream_job.h"
#include "tokenizer/tokenizer.h"

namespace vireo::server {
namespace {

Json stop_reason_json(const ChoiceState& c) {
  if (c.stop_string) return *c.stop_string;
  if (c.stop_token_id) return *c.stop_token_id;
  return nullptr;
}

// usage.prompt_tokens_details.cached_tokens when the server reports it: the first choice's prefix-cache hits
// (every choice has the one prompt).
std::optional<int64_t> cached_of(const ChatRequest& req, const ChoiceGroup& group) {
  return reported_cached(req.tokens_details, group.choices().empty() ? 0 : group.choices()[0].num_cached_tokens);
}

class ChatStreamFormatter : public StreamFormatter {
 public:
  ChatStreamFormatter(const Tokenizer& tok, ChatRequest req, ChatParsing parsing, std::string id, int64_t created,
                      int num_prompt_tokens)
      : tok_(tok), req_(std::move(req)), parsing_(std::move(parsing)), id_(std::move(id)), created_(created),
        num_prompt_tokens_(num_prompt_tokens) {}

  // vLLM sends the role chunks with the engine's first output, so a client's time to the first chunk
  // is its time to the first token.
  bool start_with_first_output() const override { return true; }

  std::vector<Json> start(const ChoiceGroup& group) override {
    std::vector<Json> out;
    for (const auto& c : group.choices()) {
      if (parsing_.active()) parsers_[c.index].parser = parsing_.make();
      Json choice = {{"index", c.index}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"logprobs", nullptr},
                     {"finish_reason", nullptr}};
      out.push_back(chunk({choice}, c));
    }
    if (!req_.echo_text.empty())  // vLLM sends the echo as one content delta after the role
      for (const auto& c : group.choices()) {
        Json choice = {{"index", c.index}, {"delta", {{"content", req_.echo_text}}}, {"logprobs", nullptr},
                       {"finish_reason", nullptr}};
        out.push_back(chunk({choice}, c));
      }
    return out;
  }

  std::vector<Json> on_output(const ChoiceState& c, const RequestOutput& out) override {
    Json logprobs = nullptr;
    if (req_.logprobs && !out.logprobs.empty()) {
      Json content = Json::array();
      for (const auto& e : out.logprobs) content.push_back(chat_logprob_entry(tok_, e, req_.top_logprobs, req_.tokens_as_ids));
      logprobs = {{"content", content}};
    }
    // Parsers hold back text that may be a tag, so a token can give an empty delta.
    ChoiceParse& p = parsers_[c.index];
    ChatDelta d = parse_output_step(p.parser.get(), out.text, out.finished);
    Json delta = chat_delta_json(d, p.num_calls);
    // As vLLM: without a parser, every output that carries tokens gives a chunk, its content "" when the
    // text is held back or empty; a parser holding text back gives none (vLLM's None delta).
    if (delta.empty() && !p.parser && !out.token_ids.empty()) delta = {{"content", ""}};
    if (delta.empty() && !out.finished && logprobs.is_null()) return {};
    Json choice = {{"index", c.index}, {"delta", delta}, {"logprobs", logprobs}, {"finish_reason", nullptr}};
    if (out.finished) {
      choice["finish_reason"] = parsing_.finish_reason(p.num_calls > 0, c.finish_reason);
      choice["stop_reason"] = stop_reason_json(c);
    }
    return {chunk({choice}, c)};
  }

  std::optional<Json> final_chunk(const ChoiceGroup& group) override {
    if (!req_.include_usage) return std::nullopt;
    int64_t completion = 0;
    for (const auto& c : group.choices()) completion += c.num_output_tokens;
    return Json{{"id", id_}, {"object", "chat.completion.chunk"}, {"created", created_}, {"model", req_.model},
                {"choices", Json::array()}, {"usage", usage_json(num_prompt_tokens_, completion, cached_of(req_, group))}};
  }

 private:
  Json chunk(Json choices, const ChoiceState& c) const {
    Json j = {{"id", id_}, {"object", "chat.completion.chunk"}, {"created", created_}, {"model", req_.model}, {"choices", choices}};
    if (req_.continuous_usage)
      j["usage"] = usage_json(num_prompt_tokens_, c.num_output_tokens, reported_cached(req_.tokens_details, c.num_cached_tokens));
    return j;
  }
  struct ChoiceParse {
    std::unique_ptr<ChatOutputParser> parser;  // null: no parsing, the text is all content
    int num_calls = 0;                         // tool calls streamed so far (their indices)
  };
  const Tokenizer& tok_;
  ChatRequest req_;
  ChatParsing parsing_;
  std::map<int, ChoiceParse> parsers_;  // by choice index
  std::string id_;
  int64_t created_;
  int num_prompt_tokens_;
};

Json chat_response(const Tokenizer& tok, const ChatRequest& req, const ChatParsing& parsing, const ChoiceGroup& group,
                   const std::string& id, int64_t created, const std::vector<int32_t>& prompt) {
  Json choices = Json::array();
  int64_t completion = 0;
  for (const auto& c : group.choices()) {
    completion += c.num_output_tokens;
    Json logprobs = nullptr;
    if (req.logprobs) {
      Json content = Json::array();
      for (const auto& e : c.logprobs) content.push_back(chat_logprob_entry(tok, e, req.top_logprobs, req.tokens_as_ids));
      logprobs = {{"content", content}};
    }
    ChatDelta parsed;
    if (parsing.active()) parsed = parsing.make()->parse_all(c.text);
    else parsed.content = c.text;
    if (!req.echo_text.empty()) parsed.content = req.echo_text + parsed.content;
    choices.push_back({{"index", c.index},
                       {"message", chat_message_json(parsed, parsing.active())},
                       {"logprobs", logprobs},
                       {"finish_reason", parsing.finish_reason(!parsed.calls.empty(), c.finish_reason)},
                       {"stop_reason", stop_reason_json(c)}});
  }
  Json prompt_logprobs = nullptr;  // every choice saw the same prompt
  if (req.params.prompt_logprobs && !group.choices().empty())
    prompt_logprobs = prompt_logprobs_json(tok, prompt, group.choices()[0].prompt_logprobs, *req.params.prompt_logprobs);
  return {{"id", id}, {"object", "chat.completion"}, {"created", created}, {"model", req.model},
          {"choices", choices}, {"usage", usage_json(static_cast<int64_t>(prompt.size()), completion, cached_of(req, group))},
          {"prompt_logprobs", prompt_logprobs}};
}

}  // namespace

void handle_chat_completions(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  ActiveJob active(ctx);
  StartingGuard starting(ctx);
  auto engine = ctx.engine();
  ModelInfo info = ctx.model_info();
  Json body = parse_json_body(req);
  ChatRequest r = parse_chat_request(body, info, ctx.options().limits);
  apply_server_defaults(ctx.options(), body, r);
  ChatParsing parsing = chat_parsing_for(ctx.options(), r);
  std::vector<int32_t> ids = prepare_chat_prompt(*engine, r, info);
  const Tokenizer& tok = engine->tokenizer();
  r.params.bad_words_token_ids = tokenize_bad_words(r.params.bad_words, tok, info.vocab_size);
  int num_prompt = static_cast<int>(ids.size());

  std::string id = ctx.new_id("chatcmpl");
  int64_t created = unix_now();
  auto group = std::make_unique<ChoiceGroup>(ctx, engine, id);
  group->add_prompt(0, ids, r.params);
  ConnectionProbe probe(req.local_port, req.remote_addr, req.remote_port);
  if (r.stream) {
    auto fmt = std::make_unique<ChatStreamFormatter>(tok, r, parsing, id, created, num_prompt);
    install_stream(res, std::make_shared<StreamJob>(ctx, engine, std::move(group), std::move(fmt), std::move(probe)), starting);
    return;
  }
  starting.finish_now();  // a plain response is not cut short by the listener stopping
  if (!collect_all(ctx, *group, probe)) return;
  send_json(res, 200, chat_response(tok, r, parsing, *group, id, created, ids));
}

}  // namespace vireo::server
