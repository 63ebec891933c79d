#include "server/score_handlers.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "model/model_config.h"
#include "server/embeddings_handler.h"
#include "server/http_util.h"
#include "server/json_fields.h"
#include "server/openai_errors.h"
#include "server/prompt_truncation.h"
#include "server/request_validation.h"
#include "server/stream_job.h"
#include "tokenizer/tokenizer.h"

namespace vireo::server {
namespace {

// torch.nn.functional.cosine_similarity (eps 1e-8 on each norm).
double cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double dot = 0, na = 0, nb = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    dot += static_cast<double>(a[i]) * b[i];
    na += static_cast<double>(a[i]) * a[i];
    nb += static_cast<double>(b[i]) * b[i];
  }
  return dot / (std::max(std::sqrt(na), 1e-8) * std::max(std::sqrt(nb), 1e-8));
}

// A string or a non-empty list of strings.
std::vector<std::string> texts(const Json& body, const char* key) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) throw bad_request(std::string("'") + key + "' is required", key);
  std::vector<std::string> out;
  if (it->is_string()) {
    out.push_back(it->get<std::string>());
  } else if (it->is_array() && !it->empty()) {
    for (const Json& x : *it) {
      if (!x.is_string()) throw bad_request(std::string("'") + key + "' must hold strings", key);
      out.push_back(x.get<std::string>());
    }
  } else {
    throw bad_request(std::string("'") + key + "' must be a string or a non-empty list of strings", key);
  }
  return out;
}

struct Scoring {
  std::shared_ptr<AsyncEngine> engine;
  ModelInfo info;
  std::string model;
};

Scoring start(ServerContext& ctx, const Json& body) {
  Scoring s{ctx.engine(), ctx.model_info(), ""};
  if (!body.is_object()) throw bad_request("The request body must be a JSON object");
  s.model = check_model_name(body, s.info);
  return s;
}

// The texts tokenized (special tokens added, as for embeddings), truncated and checked; their token count.
std::vector<std::vector<int32_t>> tokenize(const Scoring& s, const std::vector<std::string>& t, std::optional<int> keep,
                                           const char* param, int64_t& num_tokens) {
  std::vector<std::vector<int32_t>> out;
  for (const auto& text : t) {
    auto ids = s.engine->tokenizer().encode(text, true);
    if (ids.empty()) throw bad_request("A text must not be empty", param);
    truncate_prompt(ids, keep);
    check_context_length(static_cast<int>(ids.size()), std::nullopt, s.info.max_model_len, param);
    num_tokens += static_cast<int64_t>(ids.size());
    out.push_back(std::move(ids));
  }
  return out;
}

}  // namespace

void handle_score(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  ActiveJob active(ctx);
  StartingGuard starting(ctx);
  const Json body = parse_json_body(req);
  Scoring s = start(ctx, body);
  const auto t1 = texts(body, "text_1"), t2 = texts(body, "text_2");
  if (t1.size() != 1 && t1.size() != t2.size())
    throw bad_request("text_1 must be one text or as many as text_2 (" + std::to_string(t2.size()) + ")", "text_1");
  const std::optional<int> keep = parse_truncate_prompt_tokens(body, s.info.max_model_len);
  int64_t num_tokens = 0;
  auto prompts = tokenize(s, t1, keep, "text_1", num_tokens);
  const size_t n1 = prompts.size();
  for (auto& p : tokenize(s, t2, keep, "text_2", num_tokens)) prompts.push_back(std::move(p));
  const std::string id = ctx.new_id("score");
  auto emb = embed_all(ctx, s.engine, prompts, id, "", req, starting);
  if (!emb) return;
  Json data = Json::array();
  for (size_t i = 0; i < t2.size(); ++i)
    data.push_back({{"index", i}, {"object", "score"}, {"score", cosine((*emb)[n1 == 1 ? 0 : i], (*emb)[n1 + i])}});
  send_json(res, 200,
            {{"id", id}, {"object", "list"}, {"created", unix_now()}, {"model", s.model}, {"data", std::move(data)},
             {"usage", {{"prompt_tokens", num_tokens}, {"total_tokens", num_tokens}, {"completion_tokens", 0},
                        {"prompt_tokens_details", nullptr}}}});
}

void handle_rerank(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  ActiveJob active(ctx);
  StartingGuard starting(ctx);
  const Json body = parse_json_body(req);
  Scoring s = start(ctx, body);
  auto query = get_string(body, "query");
  if (!query) throw bad_request("'query' must be a string", "query");
  // Documents as strings, or as {"text": ...} objects (Cohere / Jina clients send either).
  std::vector<std::string> docs;
  auto it = body.find("documents");
  if (it == body.end() || !it->is_array() || it->empty())
    throw bad_request("'documents' must be a non-empty list", "documents");
  for (const Json& d : *it) {
    if (d.is_string()) docs.push_back(d.get<std::string>());
    else if (d.is_object() && d.contains("text") && d["text"].is_string()) docs.push_back(d["text"].get<std::string>());
    else throw bad_request("'documents' must hold strings or {\"text\": ...} objects", "documents");
  }
  const int64_t top_n = get_int(body, "top_n").value_or(0);
  if (top_n < 0) throw bad_request("top_n must be >= 0", "top_n");
  const std::optional<int> keep = parse_truncate_prompt_tokens(body, s.info.max_model_len);
  int64_t num_tokens = 0;
  auto prompts = tokenize(s, {*query}, keep, "query", num_tokens);
  for (auto& p : tokenize(s, docs, keep, "documents", num_tokens)) prompts.push_back(std::move(p));
  const std::string id = ctx.new_id("rerank");
  auto emb = embed_all(ctx, s.engine, prompts, id, "", req, starting);
  if (!emb) return;
  std::vector<size_t> order(docs.size());
  std::iota(order.begin(), order.end(), 0);
  std::vector<double> score(docs.size());
  for (size_t i = 0; i < docs.size(); ++i) score[i] = cosine((*emb)[0], (*emb)[i + 1]);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return score[a] > score[b]; });
  if (top_n > 0 && static_cast<size_t>(top_n) < order.size()) order.resize(static_cast<size_t>(top_n));
  Json results = Json::array();
  for (size_t i : order)
    results.push_back({{"index", i}, {"document", {{"text", docs[i]}}}, {"relevance_score", score[i]}});
  send_json(res, 200, {{"id", id}, {"model", s.model}, {"usage", {{"total_tokens", num_tokens}}}, {"results", std::move(results)}});
}

}  // namespace vireo::server
