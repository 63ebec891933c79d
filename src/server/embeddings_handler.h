// POST /v1/embeddings (OpenAI's embeddings.create, as vLLM serves pooling models: --runner pooling).
#pragma once
#include <httplib.h>

#include <optional>
#include <string>
#include <vector>

#include "server/json_fields.h"
#include "server/server_context.h"
#include "server/stream_job.h"

namespace vireo {
class Tokenizer;
}

namespace vireo::server {

void handle_embeddings(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
// POST /pooling (vLLM's pooling API): the same request, items {"object": "pooling", "data": [...]}.
void handle_pooling(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);

// The "input" of an embeddings / classify request as token ids: a string, strings, ids or lists of ids
// (strings tokenized with special tokens when `special`); 400 (param input) for anything else or an empty one.
std::vector<std::vector<int32_t>> input_ids(const Json& body, const Tokenizer& tok, int32_t vocab, bool special);

// Runs each prompt as a pooling request and returns its embedding, in order; nullopt when the client went
// away (the requests are aborted). Throws ApiError for an engine refusal or a failed request.
std::optional<std::vector<std::vector<float>>> embed_all(ServerContext& ctx, std::shared_ptr<AsyncEngine> engine,
                                                         const std::vector<std::vector<int32_t>>& prompts,
                                                         const std::string& id, const std::string& cache_salt,
                                                         const httplib::Request& req, StartingGuard& starting);

}  // namespace vireo::server
