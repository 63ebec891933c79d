#include "server/info_handlers.h"

#include <filesystem>
#include <fstream>

#include "model/model_config.h"
#include "server/completion_handler.h"
#include "server/http_util.h"
#include "server/metrics_renderer.h"
#include "server/request_validation.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace vireo::server {

// vLLM shapes: {"prompt", "add_special_tokens"=true} or {"messages", "add_generation_prompt"=true,
// "add_special_tokens"=false, ...} -> {"count", "max_model_len", "tokens", "token_strs"}.
void handle_tokenize(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  auto engine = ctx.engine();
  ModelInfo info = ctx.model_info();
  Json body = parse_json_body(req);
  check_model_name(body, info);
  const Tokenizer& tok = engine->tokenizer();
  bool has_prompt = body.contains("prompt") && !body["prompt"].is_null();
  bool has_messages = body.contains("messages") && !body["messages"].is_null();
  if (has_prompt == has_messages) throw bad_request("Exactly one of 'prompt' or 'messages' is required", "prompt");
  std::vector<int32_t> ids;
  if (has_prompt) {
    auto prompt = get_string(body, "prompt");
    bool special = get_bool(body, "add_special_tokens").value_or(true);
    ids = tok.encode(*prompt, special);
  } else {
    Json chat_body = body;  // reuse the chat validation of messages / tools / kwargs
    chat_body.erase("add_special_tokens");
    chat_body.erase("return_token_strs");
    ModelInfo chat_info = info;
    chat_info.pooling = false;  // /tokenize renders chat messages for pooling models too
    ChatRequest r = parse_chat_request(chat_body, chat_info, ctx.options().limits);
    bool special = get_bool(body, "add_special_tokens").value_or(false);
    std::string text = render_chat(*engine, r);
    ids = tok.encode(text, special);
  }
  Json out = {{"count", ids.size()}, {"max_model_len", info.max_model_len}, {"tokens", ids}, {"token_strs", nullptr}};
  if (get_bool(body, "return_token_strs").value_or(false)) {
    Json strs = Json::array();
    for (int32_t id : ids) strs.push_back(tok.id_to_token(id));
    out["token_strs"] = strs;
  }
  send_json(res, 200, out);
}

void handle_detokenize(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  auto engine = ctx.engine();
  ModelInfo info = ctx.model_info();
  Json body = parse_json_body(req);
  check_model_name(body, info);
  auto ids64 = get_int_list(body, "tokens");
  if (!ids64) throw bad_request("'tokens' is required", "tokens");
  std::vector<int32_t> ids;
  for (int64_t id : *ids64) {
    if (id < 0 || id >= info.vocab_size)
      throw bad_request("Token id " + std::to_string(id) + " is out of vocabulary (vocab size " +
                            std::to_string(info.vocab_size) + ")", "tokens");
    ids.push_back(static_cast<int32_t>(id));
  }
  send_json(res, 200, {{"prompt", engine->tokenizer().decode(ids, false)}});
}

namespace {

// One card per served name, as vLLM (all with the same root).
Json model_cards(ServerContext& ctx) {
  auto engine = ctx.engine();
  ModelInfo info = ctx.model_info();
  std::string root = engine->config().model.empty() ? info.served_model_name : engine->config().model;
  std::vector<std::string> names = {info.served_model_name};
  names.insert(names.end(), info.served_model_aliases.begin(), info.served_model_aliases.end());
  Json data = Json::array();
  const int64_t created = unix_now();
  for (const auto& name : names)
    data.push_back({{"id", name},     {"object", "model"}, {"created", created},
                    {"owned_by", "vireo"}, {"root", root},    {"parent", nullptr},
                    {"max_model_len", info.max_model_len}});
  for (const auto& lora : info.loras)  // vLLM's LoRA cards: the adapter's path as root, the base as parent
    data.push_back({{"id", lora.name},     {"object", "model"}, {"created", created},
                    {"owned_by", "vireo"}, {"root", lora.path}, {"parent", info.served_model_name},
                    {"max_model_len", nullptr}});
  return data;
}

}  // namespace

void handle_models(ServerContext& ctx, const httplib::Request&, httplib::Response& res) {
  send_json(res, 200, {{"object", "list"}, {"data", model_cards(ctx)}});
}

void handle_model(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  // OpenAI's GET /v1/models/{model} (the SDKs' models.retrieve; LangChain and others call it to check
  // a model). vLLM has no such route and answers 404 to every name; here a served name gets its card.
  const std::string name = req.matches.size() > 1 ? req.matches[1].str() : std::string();
  for (const auto& card : model_cards(ctx))
    if (card["id"] == name) {
      send_json(res, 200, card);
      return;
    }
  throw ApiError(404, "NotFoundError", "The model `" + name + "` does not exist.", "model");
}

void handle_version(ServerContext&, const httplib::Request&, httplib::Response& res) {
  send_json(res, 200, {{"version", kVireoVersion}});
}

void handle_tokenizer_info(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  if (!ctx.options().enable_tokenizer_info_endpoint) throw not_found("Not Found: " + req.path);  // as vLLM: no route
  auto engine = ctx.engine();
  const EngineConfig& c = engine->config();
  const std::string dir = c.tokenizer.empty() ? c.model : c.tokenizer;
  Json out = Json::object();
  std::error_code ec;
  if (!dir.empty() && std::filesystem::is_directory(dir, ec)) {
    std::ifstream f(std::filesystem::path(dir) / "tokenizer_config.json");
    if (f) {
      Json cfg = Json::parse(f, nullptr, /*allow_exceptions=*/false);
      if (cfg.is_object()) out = std::move(cfg);
    }
  }
  // transformers' AutoTokenizer loads the fast class of the one the config names (Qwen2Tokenizer ->
  // Qwen2TokenizerFast); vLLM reports the loaded object's class.
  std::string cls = out.contains("tokenizer_class") && out["tokenizer_class"].is_string()
                        ? out["tokenizer_class"].get<std::string>()
                        : "PreTrainedTokenizer";
  if (cls.size() < 4 || cls.compare(cls.size() - 4, 4, "Fast") != 0) cls += "Fast";
  out["tokenizer_class"] = cls;
  if (const ChatTemplate* t = engine->chat_template(); t != nullptr && !out.contains("chat_template"))
    out["chat_template"] = t->source();
  send_json(res, 200, out);
}

// vLLM's GET /load ({"server_load": n}, the requests in flight; vLLM counts them where
// --enable-server-load-tracking is on): here always, the engine's running and waiting requests.
void handle_load(ServerContext& ctx, const httplib::Request&, httplib::Response& res) {
  int load = 0;
  if (auto engine = ctx.engine()) {
    const EngineStats stats = engine->stats();
    load = stats.num_requests_running + stats.num_requests_waiting;
  }
  send_json(res, 200, {{"server_load", load}});
}

void handle_metrics(ServerContext& ctx, const httplib::Request&, httplib::Response& res) {
  auto engine = ctx.engine();
  EngineStats stats;
  std::string name = ctx.options().served_model_name;
  if (engine) {
    stats = engine->stats();
    name = ctx.model_info().served_model_name;
  }
  res.status = 200;
  res.set_content(render_metrics(stats, ctx.finish_counts(), name), "text/plain; version=0.0.4; charset=utf-8");
}

}  // namespace vireo::server
