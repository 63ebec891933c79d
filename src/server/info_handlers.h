// The non-generating routes: /tokenize, /detokenize, /v1/models, /version, /metrics.
#pragma once
#include <httplib.h>

#include "server/server_context.h"

namespace vireo::server {

void handle_tokenize(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_detokenize(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_models(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
// GET /v1/models/{model}: a served name's card (as in the list), else 404 NotFoundError (param "model").
void handle_model(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_version(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
// GET /tokenizer_info (--enable-tokenizer-info-endpoint): vLLM's TokenizerInfo, the tokenizer's
// tokenizer_config.json with tokenizer_class and the chat template in use.
void handle_tokenizer_info(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_metrics(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_load(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);

inline constexpr const char* kVireoVersion = "0.1.0";

}  // namespace vireo::server
