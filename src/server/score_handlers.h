// vLLM's scoring routes for embedding models (--runner pooling): POST /score and /v1/score (text_1 against
// text_2: one to one, one to many, or pairwise lists) and POST /rerank, /v1/rerank, /v2/rerank (a query
// against documents, best first, Jina / Cohere shape). A score is the cosine similarity of the two
// embeddings, as vLLM scores with an embedding model, or with a one-label sequence classifier (a
// cross-encoder reranker) the sigmoid of its logit over the two texts' tokens one after the other.
#pragma once
#include <httplib.h>

#include "server/server_context.h"

namespace vireo::server {

void handle_score(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_rerank(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
// POST /classify (a *ForSequenceClassification checkpoint): input as /v1/embeddings; per input the label
// probabilities (softmax, sigmoid for one label) and the most probable label.
void handle_classify(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);

}  // namespace vireo::server
