#include "server/lora_handlers.h"

#include "core/error.h"
#include "server/http_util.h"
#include "server/json_fields.h"
#include "server/openai_errors.h"

namespace vireo::server {
namespace {

std::string lora_name_of(const Json& body) {
  auto name = get_string(body, "lora_name");
  if (!name || name->empty()) throw bad_request("'lora_name' must be a non-empty string", "lora_name");
  return *name;
}

void check_enabled(ServerContext& ctx) {
  if (!ctx.options().allow_runtime_lora_updating) throw ApiError(404, "NotFoundError", "Not Found");
  if (!ctx.engine()->config().enable_lora)
    throw bad_request("LoRA is not enabled: start the server with --enable-lora");
}

}  // namespace

void handle_load_lora(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  check_enabled(ctx);
  const Json body = parse_json_body(req);
  const std::string name = lora_name_of(body);
  auto path = get_string(body, "lora_path");
  if (!path || path->empty()) throw bad_request("'lora_path' must be a non-empty string", "lora_path");
  try {
    ctx.engine()->load_lora(name, *path);
  } catch (const Error& e) {
    throw bad_request(e.what(), "lora_path");
  }
  res.status = 200;
  res.set_content("Success: LoRA adapter '" + name + "' added successfully.", "text/plain; charset=utf-8");
}

void handle_unload_lora(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  check_enabled(ctx);
  const Json body = parse_json_body(req);
  const std::string name = lora_name_of(body);
  if (ctx.engine()->lora_id(name) == 0)
    throw ApiError(404, "NotFoundError", "The lora adapter '" + name + "' cannot be found.", "lora_name");
  try {
    ctx.engine()->unload_lora(name);
  } catch (const Error& e) {
    throw ApiError(404, "NotFoundError", e.what(), "lora_name");
  }
  res.status = 200;
  res.set_content("Success: LoRA adapter '" + name + "' removed successfully.", "text/plain; charset=utf-8");
}

}  // namespace vireo::server
