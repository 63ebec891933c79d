// POST /v1/embeddings (OpenAI's embeddings.create, as vLLM serves pooling models: --runner pooling).
#pragma once
#include <httplib.h>

#include <optional>
#include <string>
#include <vector>

#include "server/json_fields.h"
#include "server/request_types.h"
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

// Keeps the last `keep` tokens of `ids` (truncate_prompt_tokens) and checks them against the context (400
// naming `param`); returns their count, for usage.
int64_t fit_prompt(std::vector<int32_t>& ids, std::optional<int> keep, int max_model_len, const char* param);
// fit_prompt over a request's inputs (param "input"), at most limits.max_batch_prompts of them; the tokens in all.
int64_t fit_inputs(std::vector<std::vector<int32_t>>& prompts, std::optional<int> keep, int max_model_len,
                   const ValidationLimits& limits);

// Runs each prompt as a pooling request and returns its embedding, in order; nullopt when the client went
// away (the requests are aborted). Throws ApiError for an engine refusal or a failed request.
std::optional<std::vector<std::vector<float>>> embed_all(ServerContext& ctx, std::shared_ptr<AsyncEngine> engine,
                                                         const std::vector<std::vector<int32_t>>& prompts,
                                                         const std::string& id, const std::string& cache_salt,
                                                         const httplib::Request& req, StartingGuard& starting);

}  // namespace vireo::server
