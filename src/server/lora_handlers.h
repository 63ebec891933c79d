// vLLM's runtime LoRA routes: POST /v1/load_lora_adapter {"lora_name", "lora_path"} and
// POST /v1/unload_lora_adapter {"lora_name"}; answered only with VLLM_ALLOW_RUNTIME_LORA_UPDATING set
// (ServerOptions::allow_runtime_lora_updating), 404 otherwise, as vLLM registers them only then.
#pragma once
#include <httplib.h>

#include "server/server_context.h"

namespace vireo::server {

void handle_load_lora(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_unload_lora(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);

}  // namespace vireo::server
