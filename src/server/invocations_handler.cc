#include "server/invocations_handler.h"

#include <string>

#include "server/openai_errors.h"
#include "server/completion_handler.h"
#include "server/embeddings_handler.h"
#include "server/http_util.h"
#include "server/score_handlers.h"

namespace vireo::server {

// vLLM tries its request types in turn (chat, completion, then the pooling ones when served) and takes the
// first the body validates as; the field each requires tells them apart here. The body is parsed again
// by the handler chosen (a few microseconds against a generation).
void handle_invocations(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const Json body = parse_json_body(req);
  const bool pooling = ctx.engine() && ctx.engine()->config().pooling.enabled;
  if (body.is_object()) {
    // A field sent as null is absent (a chat body could not validate with "messages": null).
    auto has = [&](const char* k) { return body.contains(k) && !body[k].is_null(); };
    if (!pooling && has("messages")) return handle_chat_completions(ctx, req, res);
    if (!pooling && has("prompt")) return handle_completions(ctx, req, res);
    if (pooling && (has("input") || has("messages"))) return handle_embeddings(ctx, req, res);
    if (pooling && has("query") && has("documents")) return handle_rerank(ctx, req, res);
    if (pooling && has("text_1") && has("text_2")) return handle_score(ctx, req, res);
  }
  const std::string expected = pooling ? "EmbeddingRequest (input or messages), RerankRequest (query, documents), ScoreRequest (text_1, text_2)"
                                       : "ChatCompletionRequest (messages), CompletionRequest (prompt)";
  throw bad_request("Cannot find suitable handler for request. Expected one of: " + expected);
}

}  // namespace vireo::server
