// /v1/completions: prompts (text or ids, batched) x n choices; echo, logprobs, streaming.
#include "server/completion_handler.h"

#include <algorithm>

#include "server/bad_words.h"
#include "server/http_util.h"
#include "server/logprobs_format.h"
#include "server/prompt_truncation.h"
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

std::string echo_text(const Tokenizer& tok, const PromptInput& p) {
  if (p.text) return *p.text;
  return tok.decode(p.token_ids, false);
}

// Echo + logprobs: the prompt's entries come first; the first prompt token has none.
void add_prompt_logprobs(CompletionLogprobs& lp, const PromptInput& p, const ChoiceState& c) {
  for (size_t k = 0; k < p.token_ids.size(); ++k) {
    const TokenLogprob* entry = nullptr;
    if (k < c.prompt_logprobs.size() && c.prompt_logprobs[k]) entry = &*c.prompt_logprobs[k];
    lp.add(p.token_ids[k], entry);
  }
}

// The request's usage: each prompt's tokens (and prefix-cache hits) counted once, every choice's output.
Json completion_usage(const CompletionRequest& req, const ChoiceGroup& group) {
  int64_t prompt = 0, completion = 0, cached = 0;
  std::vector<bool> seen(req.prompts.size(), false);
  for (const auto& c : group.choices()) {
    if (!seen[c.prompt_index]) prompt += c.num_prompt_tokens, cached += c.num_cached_tokens;
    seen[c.prompt_index] = true;
    completion += c.num_output_tokens;
  }
  return usage_json(prompt, completion, reported_cached(req.tokens_details, cached));
}

class CompletionStreamFormatter : public StreamFormatter {
 public:
  CompletionStreamFormatter(const Tokenizer& tok, CompletionRequest req, std::string id, int64_t created)
      : tok_(tok), req_(std::move(req)), id_(std::move(id)), created_(created) {}

  std::vector<Json> on_output(const ChoiceState& c, const RequestOutput& out) override {
    auto& st = state_for(c.index);
    std::string text;
    if (!st.started) {
      st.started = true;
      const PromptInput& p = req_.prompts[c.prompt_index];
      if (req_.echo) {
        text = echo_text(tok_, p);
        if (st.lp) add_prompt_logprobs(*st.lp, p, c);
      }
    }
    if (!req_.echo_only) {  // echo with max_tokens 0: the generated token is dropped
      text += out.text;
      if (st.lp)
        for (size_t k = 0; k < out.logprobs.size(); ++k) st.lp->add(out.logprobs[k].token_id, &out.logprobs[k]);
    }
    // As vLLM: a chunk for every output that carries tokens, even when their text is held back (part of a
    // UTF-8 character, a possible stop string) or empty (a special token): clients time tokens by chunks.
    if (text.empty() && out.token_ids.empty() && !out.finished && (!st.lp || st.lp->empty())) return {};
    Json choice = {{"index", c.index}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", nullptr}, {"stop_reason", nullptr}};
    if (st.lp) choice["logprobs"] = st.lp->take();
    if (out.finished) {
      choice["finish_reason"] = c.finish_reason;
      choice["stop_reason"] = stop_reason_json(c);
    }
    Json chunk = {{"id", id_}, {"object", "text_completion"}, {"created", created_}, {"model", req_.model}, {"choices", {choice}}};
    if (req_.continuous_usage)
      chunk["usage"] = usage_json(c.num_prompt_tokens, c.num_output_tokens,
                                  reported_cached(req_.tokens_details, c.num_cached_tokens));
    return {chunk};
  }

  std::optional<Json> final_chunk(const ChoiceGroup& group) override {
    if (!req_.include_usage) return std::nullopt;
    return Json{{"id", id_}, {"object", "text_completion"}, {"created", created_}, {"model", req_.model},
                {"choices", Json::array()}, {"usage", completion_usage(req_, group)}};
  }

 private:
  struct PerChoice {
    bool started = false;
    std::optional<CompletionLogprobs> lp;
  };
  PerChoice& state_for(int index) {
    auto it = per_choice_.find(index);
    if (it == per_choice_.end()) {
      it = per_choice_.emplace(index, PerChoice{}).first;
      if (req_.params.logprobs) it->second.lp.emplace(tok_, *req_.params.logprobs, 0, req_.tokens_as_ids);
    }
    return it->second;
  }
  const Tokenizer& tok_;
  CompletionRequest req_;
  std::string id_;
  int64_t created_;
  std::map<int, PerChoice> per_choice_;
};

Json completion_response(const Tokenizer& tok, const CompletionRequest& req, const ChoiceGroup& group,
                         const std::string& id, int64_t created) {
  Json choices = Json::array();
  for (const auto& c : group.choices()) {
    const PromptInput& p = req.prompts[c.prompt_index];
    std::string text = req.echo ? echo_text(tok, p) : "";
    if (!req.echo_only) text += c.text;  // echo with max_tokens 0: the generated token is dropped
    Json logprobs = nullptr;
    if (req.params.logprobs) {
      CompletionLogprobs lp(tok, *req.params.logprobs, 0, req.tokens_as_ids);
      if (req.echo) add_prompt_logprobs(lp, p, c);
      if (!req.echo_only)
        for (const auto& e : c.logprobs) lp.add(e.token_id, &e);
      logprobs = lp.take();
    }
    Json prompt_logprobs = nullptr;  // vLLM fills it under echo + logprobs too
    if (req.params.prompt_logprobs)
      prompt_logprobs = prompt_logprobs_json(tok, p.token_ids, c.prompt_logprobs, *req.params.prompt_logprobs);
    choices.push_back({{"index", c.index},
                       {"text", text},
                       {"logprobs", logprobs},
                       {"finish_reason", c.finish_reason},
                       {"stop_reason", stop_reason_json(c)},
                       {"prompt_logprobs", prompt_logprobs}});
  }
  return {{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", req.model},
          {"choices", choices}, {"usage", completion_usage(req, group)}};
}

}  // namespace

void handle_completions(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  ActiveJob active(ctx);
  StartingGuard starting(ctx);
  auto engine = ctx.engine();
  ModelInfo info = ctx.model_info();
  Json body = parse_json_body(req);
  CompletionRequest r = parse_completion_request(body, info, ctx.options().limits);
  apply_server_defaults(ctx.options(), body, r);
  const Tokenizer& tok = engine->tokenizer();
  r.params.bad_words_token_ids = tokenize_bad_words(r.params.bad_words, tok, info.vocab_size);
  for (auto& p : r.prompts) {
    if (p.text) {
      p.token_ids = tok.encode(*p.text, r.add_special_tokens);  // vLLM: add_special_tokens defaults to true here
      if (p.token_ids.empty()) throw bad_request("The prompt must not be empty", "prompt");
    }
    // The echo then shows the prompt the model saw: the kept tokens, decoded.
    if (truncate_prompt(p.token_ids, r.truncate_prompt_tokens)) p.text.reset();
    check_context_length(static_cast<int>(p.token_ids.size()), r.params.max_tokens, info.max_model_len, "prompt");
  }
  std::string id = ctx.new_id("cmpl");
  int64_t created = unix_now();
  auto group = std::make_unique<ChoiceGroup>(ctx, engine, id);
  for (size_t i = 0; i < r.prompts.size(); ++i) {
    SamplingParams params = r.params;
    if (r.max_tokens_to_context) {  // >= 1: check_context_length passed with 1
      params.max_tokens = info.max_model_len - static_cast<int>(r.prompts[i].token_ids.size());
      params.min_tokens = std::min(params.min_tokens, params.max_tokens);
    }
    group->add_prompt(static_cast<int>(i), r.prompts[i].token_ids, params);
  }
  ConnectionProbe probe(req.local_port, req.remote_addr, req.remote_port);
  if (r.stream) {
    auto fmt = std::make_unique<CompletionStreamFormatter>(tok, r, id, created);
    install_stream(res, std::make_shared<StreamJob>(ctx, engine, std::move(group), std::move(fmt), std::move(probe)), starting);
    return;
  }
  starting.finish_now();  // a plain response is not cut short by the listener stopping
  if (!collect_all(ctx, *group, probe)) return;  // client gone
  send_json(res, 200, completion_response(tok, r, *group, id, created));
}

}  // namespace vireo::server
