// /v1/embeddings: input is a string, a list of strings, a list of token ids or a list of such lists;
// each becomes one engine request that runs its prompt and finishes with the pooled embedding
// (engine_core_pooling.cc). encoding_format "float" (default) or "base64" (little-endian float32 bytes,
// what the OpenAI SDKs ask for by default); dimensions only as the model's own width (no Matryoshka);
// truncate_prompt_tokens and add_special_tokens (default true) as vLLM.
#include "server/embeddings_handler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "model/model_config.h"
#include "server/chat_prompt.h"
#include "server/choice_group.h"
#include "server/connection_probe.h"
#include "server/http_util.h"
#include "server/json_fields.h"
#include "server/openai_errors.h"
#include "server/prompt_truncation.h"
#include "server/request_validation.h"
#include "server/stream_job.h"
#include "tokenizer/tokenizer.h"

namespace vireo::server {
namespace {

using namespace std::chrono_literals;

std::string base64(const std::vector<float>& v) {
  static const char* kChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes(v.size() * 4, '\0');
  std::memcpy(bytes.data(), v.data(), bytes.size());
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const uint32_t b0 = static_cast<uint8_t>(bytes[i]);
    const uint32_t b1 = i + 1 < bytes.size() ? static_cast<uint8_t>(bytes[i + 1]) : 0;
    const uint32_t b2 = i + 2 < bytes.size() ? static_cast<uint8_t>(bytes[i + 2]) : 0;
    const uint32_t n = (b0 << 16) | (b1 << 8) | b2;
    out += kChars[(n >> 18) & 63];
    out += kChars[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? kChars[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kChars[n & 63] : '=';
  }
  return out;
}

}  // namespace

std::vector<std::vector<int32_t>> input_ids(const Json& body, const Tokenizer& tok, int32_t vocab, bool special) {
  auto it = body.find("input");
  if (it == body.end() || it->is_null()) throw bad_request("'input' is required", "input");
  const Json& in = *it;
  std::vector<std::vector<int32_t>> out;
  auto ids_of = [&](const Json& list) {
    std::vector<int32_t> ids;
    for (const Json& v : list) {
      if (!v.is_number_integer()) throw bad_request("'input' token lists must hold integers", "input");
      const int64_t id = v.get<int64_t>();
      if (id < 0 || id >= vocab)
        throw bad_request("Token id " + std::to_string(id) + " is out of vocabulary (vocab size " + std::to_string(vocab) + ")",
                          "input");
      ids.push_back(static_cast<int32_t>(id));
    }
    return ids;
  };
  if (in.is_string()) {
    out.push_back(tok.encode(in.get<std::string>(), special));
  } else if (in.is_array() && !in.empty() && in[0].is_number_integer()) {
    out.push_back(ids_of(in));
  } else if (in.is_array() && !in.empty()) {
    for (const Json& x : in) {
      if (x.is_string()) out.push_back(tok.encode(x.get<std::string>(), special));
      else if (x.is_array()) out.push_back(ids_of(x));
      else throw bad_request("'input' must be a string, a list of strings or token ids, or a list of token lists", "input");
    }
  } else {
    throw bad_request("'input' must be a non-empty string, list of strings, list of token ids or list of token lists",
                      "input");
  }
  for (const auto& ids : out)
    if (ids.empty()) throw bad_request("An input must not be empty", "input");
  return out;
}

int64_t fit_prompt(std::vector<int32_t>& ids, std::optional<int> keep, int max_model_len, const char* param) {
  truncate_prompt(ids, keep);
  check_context_length(static_cast<int>(ids.size()), std::nullopt, max_model_len, param);
  return static_cast<int64_t>(ids.size());
}

int64_t fit_inputs(std::vector<std::vector<int32_t>>& prompts, std::optional<int> keep, int max_model_len,
                   const ValidationLimits& limits) {
  if (static_cast<int>(prompts.size()) > limits.max_batch_prompts)
    throw bad_request("at most " + std::to_string(limits.max_batch_prompts) + " inputs are allowed", "input");
  int64_t n = 0;
  for (auto& p : prompts) n += fit_prompt(p, keep, max_model_len, "input");
  return n;
}

std::optional<std::vector<std::vector<float>>> embed_all(ServerContext& ctx, std::shared_ptr<AsyncEngine> engine,
                                                         const std::vector<std::vector<int32_t>>& prompts,
                                                         const std::string& id, const std::string& cache_salt,
                                                         const httplib::Request& req, StartingGuard& starting) {
  SamplingParams params;
  params.max_tokens = 1;
  params.detokenize = false;
  params.cache_salt = cache_salt;
  ChoiceGroup group(ctx, engine, id);
  for (size_t i = 0; i < prompts.size(); ++i) group.add_prompt(static_cast<int>(i), prompts[i], params);
  ConnectionProbe probe(req.local_port, req.remote_addr, req.remote_port);
  starting.finish_now();
  std::vector<std::vector<float>> embeddings(prompts.size());
  while (!group.all_finished()) {
    auto out = group.next(100ms);
    if (probe.client_closed()) {
      group.abort_unfinished();
      return std::nullopt;
    }
    if (!out) continue;
    if (auto err = choice_failure(ctx, group.choices()[out->first])) {
      group.abort_unfinished();
      throw *err;
    }
    if (out->second.finished) embeddings[group.choices()[out->first].prompt_index] = std::move(out->second.embedding);
  }
  return embeddings;
}

namespace {

// /v1/embeddings and /pooling: the same request; the items are {"object": object, field: vector}.
void serve_pooled(ServerContext& ctx, const httplib::Request& req, httplib::Response& res, const char* object,
                  const char* field, const char* id_prefix) {
  ActiveJob active(ctx);
  StartingGuard starting(ctx);
  auto engine = ctx.engine();
  ModelInfo info = ctx.model_info();
  const Json body = parse_json_body(req);
  if (!body.is_object()) throw bad_request("The request body must be a JSON object");
  const std::string model = check_model_name(body, info);
  if (!engine->config().pooling.enabled)
    throw bad_request("The model does not support Embeddings API: start the server with --runner pooling", "model");
  if (!info.labels.empty())
    throw bad_request("The model is a sequence classifier: use /classify (or /score, /rerank with one label)", "model");
  const std::string format = get_string(body, "encoding_format").value_or("float");
  if (format != "float" && format != "base64")
    throw bad_request("encoding_format must be 'float' or 'base64', got '" + format + "'", "encoding_format");
  const int64_t width = engine->model_config().hidden_size;
  const PoolingSpec& pool = engine->config().pooling;
  std::optional<int64_t> dims = get_int(body, "dimensions");
  if (dims && *dims != width) {  // vLLM's checks and messages
    if (!pool.matryoshka)
      throw bad_request("Model \"" + info.served_model_name + "\" does not support matryoshka representation, changing "
                        "output dimensions will lead to poor results.", "dimensions");
    if (*dims < 1 || *dims > width) throw bad_request("Dimensions must be greater than 0 and at most " + std::to_string(width), "dimensions");
    if (!pool.matryoshka_dims.empty() &&
        std::find(pool.matryoshka_dims.begin(), pool.matryoshka_dims.end(), *dims) == pool.matryoshka_dims.end())
      throw bad_request("Model \"" + info.served_model_name + "\" only supports dimensions in its matryoshka_dimensions",
                        "dimensions");
  }
  get_string(body, "user");  // accepted, type-checked, unused
  const bool special = get_bool(body, "add_special_tokens").value_or(true);
  const std::optional<int> keep = parse_truncate_prompt_tokens(body, info.max_model_len);
  std::vector<std::vector<int32_t>> prompts;
  if (body.contains("messages") && !body["messages"].is_null()) {
    // vLLM's chat form of the request: the messages rendered by the chat template, one input.
    if (body.contains("input") && !body["input"].is_null()) throw bad_request("Give either 'input' or 'messages'", "messages");
    Json chat_body = body;
    for (const char* k : {"encoding_format", "dimensions", "add_special_tokens", "truncate_prompt_tokens", "input"})
      chat_body.erase(k);
    ModelInfo chat_info = info;
    chat_info.pooling = false;
    ChatRequest r = parse_chat_request(chat_body, chat_info, ctx.options().limits);
    // vLLM's EmbeddingChatRequest: no generation prompt unless asked for.
    if (!r.continue_final_message) r.add_generation_prompt = get_bool(body, "add_generation_prompt").value_or(false);
    prompts.push_back(engine->tokenizer().encode(render_chat(*engine, r), get_bool(body, "add_special_tokens").value_or(false)));
    if (prompts.back().empty()) throw bad_request("The rendered messages hold no tokens", "messages");
  } else {
    prompts = input_ids(body, engine->tokenizer(), info.vocab_size, special);
  }
  const int64_t num_tokens = fit_inputs(prompts, keep, info.max_model_len, ctx.options().limits);
  const std::string id = ctx.new_id(id_prefix);
  std::optional<std::vector<std::vector<float>>> embeddings =
      embed_all(ctx, engine, prompts, id, get_string(body, "cache_salt").value_or(""), req, starting);
  if (!embeddings) return;  // client gone
  if (dims && *dims < width)  // Matryoshka: the first N values, renormalised when the pooler normalises
    for (auto& e : *embeddings) {
      e.resize(static_cast<size_t>(*dims));
      if (!pool.normalize) continue;
      double n = 0;
      for (float v : e) n += static_cast<double>(v) * v;
      const double scale = 1.0 / std::max(std::sqrt(n), 1e-12);
      for (float& v : e) v = static_cast<float>(v * scale);
    }
  Json data = Json::array();
  for (size_t i = 0; i < embeddings->size(); ++i) {
    Json e = {{"index", i}, {"object", object}};
    if (format == "base64") e[field] = base64((*embeddings)[i]);
    else e[field] = (*embeddings)[i];
    data.push_back(std::move(e));
  }
  send_json(res, 200,
            {{"id", id}, {"object", "list"}, {"created", unix_now()}, {"model", model}, {"data", std::move(data)},
             {"usage", {{"prompt_tokens", num_tokens}, {"total_tokens", num_tokens}, {"completion_tokens", 0},
                        {"prompt_tokens_details", nullptr}}}});
}

}  // namespace

void handle_embeddings(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  serve_pooled(ctx, req, res, "embedding", "embedding", "embd");
}

void handle_pooling(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  serve_pooled(ctx, req, res, "pooling", "data", "pool");
}

}  // namespace vireo::server
