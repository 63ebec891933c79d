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
    num_tokens += fit_prompt(ids, keep, s.info.max_model_len, param);
    out.push_back(std::move(ids));
  }
  return out;
}

// A cross-encoder's (a one-label classifier's) input for a pair: the two texts' tokens one after the
// other, as a tokenizer's text / text_pair encoding without pair special tokens.
std::vector<int32_t> pair_ids(const Scoring& s, const std::string& a, const std::string& b, std::optional<int> keep,
                              int64_t& num_tokens) {
  std::vector<int32_t> ids = s.engine->tokenizer().encode(a, true);
  const std::vector<int32_t> second = s.engine->tokenizer().encode(b, false);
  ids.insert(ids.end(), second.begin(), second.end());
  if (ids.empty()) throw bad_request("A text must not be empty", "text_1");
  num_tokens += fit_prompt(ids, keep, s.info.max_model_len, "text_1");
  return ids;
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// Scores of (query, document) pairs: a one-label classifier's sigmoid over each pair, else the cosine of
// the two embeddings. nullopt: the client went away.
std::optional<std::vector<double>> pair_scores(ServerContext& ctx, const Scoring& s, const std::vector<std::string>& q,
                                               const std::vector<std::string>& d, std::optional<int> keep,
                                               const std::string& id, const httplib::Request& req,
                                               StartingGuard& starting, int64_t& num_tokens) {
  std::vector<double> out;
  if (!s.info.labels.empty()) {
    if (s.info.labels.size() != 1)
      throw bad_request("score / rerank need a one-label classifier; this one has " + std::to_string(s.info.labels.size()) +
                        " labels (use /classify)");
    std::vector<std::vector<int32_t>> prompts;
    for (size_t i = 0; i < d.size(); ++i) prompts.push_back(pair_ids(s, q[q.size() == 1 ? 0 : i], d[i], keep, num_tokens));
    auto logits = embed_all(ctx, s.engine, prompts, id, "", req, starting);
    if (!logits) return std::nullopt;
    for (const auto& l : *logits) out.push_back(sigmoid(l.empty() ? 0.0 : l[0]));
    return out;
  }
  auto prompts = tokenize(s, q, keep, "text_1", num_tokens);
  const size_t n1 = prompts.size();
  for (auto& p : tokenize(s, d, keep, "text_2", num_tokens)) prompts.push_back(std::move(p));
  auto emb = embed_all(ctx, s.engine, prompts, id, "", req, starting);
  if (!emb) return std::nullopt;
  for (size_t i = 0; i < d.size(); ++i) out.push_back(cosine((*emb)[n1 == 1 ? 0 : i], (*emb)[n1 + i]));
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
  const std::string id = ctx.new_id("score");
  auto scores = pair_scores(ctx, s, t1, t2, keep, id, req, starting, num_tokens);
  if (!scores) return;
  Json data = Json::array();
  for (size_t i = 0; i < t2.size(); ++i) data.push_back({{"index", i}, {"object", "score"}, {"score", (*scores)[i]}});
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
  const std::string id = ctx.new_id("rerank");
  auto scores = pair_scores(ctx, s, {*query}, docs, keep, id, req, starting, num_tokens);
  if (!scores) return;
  const std::vector<double>& score = *scores;
  std::vector<size_t> order(docs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return score[a] > score[b]; });
  if (top_n > 0 && static_cast<size_t>(top_n) < order.size()) order.resize(static_cast<size_t>(top_n));
  Json results = Json::array();
  for (size_t i : order)
    results.push_back({{"index", i}, {"document", {{"text", docs[i]}}}, {"relevance_score", score[i]}});
  send_json(res, 200, {{"id", id}, {"model", s.model}, {"usage", {{"total_tokens", num_tokens}}}, {"results", std::move(results)}});
}

void handle_classify(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  ActiveJob active(ctx);
  StartingGuard starting(ctx);
  const Json body = parse_json_body(req);
  Scoring s = start(ctx, body);
  if (s.info.labels.empty())
    throw bad_request("The model is not a sequence classifier (a *ForSequenceClassification checkpoint)", "model");
  const std::optional<int> keep = parse_truncate_prompt_tokens(body, s.info.max_model_len);
  auto prompts = input_ids(body, s.engine->tokenizer(), s.info.vocab_size, get_bool(body, "add_special_tokens").value_or(true));
  const int64_t num_tokens = fit_inputs(prompts, keep, s.info.max_model_len, ctx.options().limits);
  const std::string id = ctx.new_id("classify");
  auto logits = embed_all(ctx, s.engine, prompts, id, "", req, starting);
  if (!logits) return;
  Json data = Json::array();
  for (size_t i = 0; i < logits->size(); ++i) {
    const std::vector<float>& l = (*logits)[i];
    // vLLM's classifier activation: softmax over the labels, sigmoid for one.
    std::vector<double> probs(l.size());
    if (l.size() == 1) {
      probs[0] = sigmoid(l[0]);
    } else {
      const double mx = *std::max_element(l.begin(), l.end());
      double sum = 0;
      for (size_t c = 0; c < l.size(); ++c) sum += probs[c] = std::exp(l[c] - mx);
      for (double& p : probs) p /= sum;
    }
    const size_t best = static_cast<size_t>(std::max_element(probs.begin(), probs.end()) - probs.begin());
    data.push_back({{"index", i}, {"label", s.info.labels[best]}, {"probs", probs}, {"num_classes", l.size()}});
  }
  send_json(res, 200,
            {{"id", id}, {"object", "list"}, {"created", unix_now()}, {"model", s.model}, {"data", std::move(data)},
             {"usage", {{"prompt_tokens", num_tokens}, {"total_tokens", num_tokens}, {"completion_tokens", 0},
                        {"prompt_tokens_details", nullptr}}}});
}

}  // namespace vireo::server
