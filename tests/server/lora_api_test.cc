// LoRA through the API (vLLM's): adapters are listed by /v1/models with the base model as parent, a
// request whose "model" names one runs with it and its responses carry that name; the runtime routes
// /v1/load_lora_adapter and /v1/unload_lora_adapter answer only with VLLM_ALLOW_RUNTIME_LORA_UPDATING;
// cache_salt reaches the engine.
#include <gtest/gtest.h>

#include "server_fixture.h"

namespace vireo::testing {
namespace {

using json = nlohmann::json;

FakeEngineOptions lora_engine() {
  FakeEngineOptions o;
  o.enable_lora = true;
  return o;
}

server::ServerOptions runtime_updates() {
  server::ServerOptions o;
  o.allow_runtime_lora_updating = true;
  return o;
}

TEST(LoraApi, AdaptersAreModelsRequestsCanName) {
  LiveServer srv(runtime_updates(), lora_engine());
  auto cli = srv.client();
  auto r = post_json(cli, "/v1/load_lora_adapter", {{"lora_name", "sql"}, {"lora_path", "/adapters/sql"}});
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->body, "Success: LoRA adapter 'sql' added successfully.");
  r = cli.Get("/v1/models");
  ASSERT_EQ(r->status, 200);
  const json models = json::parse(r->body)["data"];
  ASSERT_EQ(models.size(), 2u);
  EXPECT_EQ(models[1]["id"], "sql");
  EXPECT_EQ(models[1]["root"], "/adapters/sql");
  EXPECT_EQ(models[1]["parent"], "fake-model");
  EXPECT_EQ(cli.Get("/v1/models/sql")->status, 200);

  for (const char* path : {"/v1/completions", "/v1/chat/completions"}) {
    SCOPED_TRACE(path);
    json body = {{"model", "sql"}, {"max_tokens", 2}};
    if (std::string(path) == "/v1/completions") body["prompt"] = "hi";
    else body["messages"] = json::array({{{"role", "user"}, {"content", "hi"}}});
    r = post_json(cli, path, body);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(json::parse(r->body)["model"], "sql");
    EXPECT_EQ(srv.engine().last_params().lora_id, srv.engine().lora_id("sql"));
    body["model"] = "fake-model";
    r = post_json(cli, path, body);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(srv.engine().last_params().lora_id, 0);
    body["model"] = "nosuch";
    r = post_json(cli, path, body);
    ASSERT_EQ(r->status, 404) << r->body;
    EXPECT_EQ(json::parse(r->body)["error"]["message"], "The model `nosuch` does not exist.");
  }
  r = post_json(cli, "/v1/responses", {{"model", "sql"}, {"input", "hi"}, {"max_output_tokens", 2}});
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(srv.engine().last_params().lora_id, srv.engine().lora_id("sql"));

  // Loading twice, a bad path, missing fields, unloading.
  r = post_json(cli, "/v1/load_lora_adapter", {{"lora_name", "sql"}, {"lora_path", "/adapters/sql"}});
  EXPECT_EQ(r->status, 400) << r->body;
  r = post_json(cli, "/v1/load_lora_adapter", {{"lora_name", "x"}, {"lora_path", "/missing"}});
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_NE(json::parse(r->body)["error"]["message"].get<std::string>().find("adapter_config.json"), std::string::npos);
  r = post_json(cli, "/v1/load_lora_adapter", {{"lora_name", "x"}});
  EXPECT_EQ(r->status, 400) << r->body;
  r = post_json(cli, "/v1/load_lora_adapter", {{"lora_name", 5}, {"lora_path", "/p"}});
  EXPECT_EQ(r->status, 400) << r->body;
  r = post_json(cli, "/v1/unload_lora_adapter", {{"lora_name", "nosuch"}});
  EXPECT_EQ(r->status, 404) << r->body;
  r = post_json(cli, "/v1/unload_lora_adapter", {{"lora_name", "sql"}});
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->body, "Success: LoRA adapter 'sql' removed successfully.");
  r = post_json(cli, "/v1/completions", {{"model", "sql"}, {"prompt", "hi"}, {"max_tokens", 2}});
  EXPECT_EQ(r->status, 404) << r->body;
  EXPECT_EQ(json::parse(cli.Get("/v1/models")->body)["data"].size(), 1u);
  const std::string metrics = cli.Get("/metrics")->body;
  EXPECT_NE(metrics.find("vllm:lora_requests_info{max_lora=\"1\",waiting_lora_adapters=\"\",running_lora_adapters=\"\"}"),
            std::string::npos)
      << metrics;
}

TEST(LoraApi, RuntimeRoutesNeedTheEnvironmentSwitchAndLora) {
  {
    LiveServer srv({}, lora_engine());  // VLLM_ALLOW_RUNTIME_LORA_UPDATING unset
    auto cli = srv.client();
    EXPECT_EQ(post_json(cli, "/v1/load_lora_adapter", {{"lora_name", "a"}, {"lora_path", "/a"}})->status, 404);
    EXPECT_EQ(post_json(cli, "/v1/unload_lora_adapter", {{"lora_name", "a"}})->status, 404);
  }
  LiveServer srv(runtime_updates());  // without --enable-lora
  auto cli = srv.client();
  auto r = post_json(cli, "/v1/load_lora_adapter", {{"lora_name", "a"}, {"lora_path", "/a"}});
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_NE(r->body.find("--enable-lora"), std::string::npos);
}

TEST(LoraApi, CacheSaltReachesTheEngine) {
  LiveServer srv;
  auto cli = srv.client();
  auto r = post_json(cli, "/v1/completions", {{"prompt", "hi"}, {"max_tokens", 2}, {"cache_salt", "tenant-1"}});
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(srv.engine().last_params().cache_salt, "tenant-1");
  r = post_json(cli, "/v1/chat/completions",
                {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}, {"cache_salt", ""}});
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_EQ(json::parse(r->body)["error"]["param"], "cache_salt");
  r = post_json(cli, "/v1/completions", {{"prompt", "hi"}, {"cache_salt", 3}});
  EXPECT_EQ(r->status, 400) << r->body;
}

}  // namespace
}  // namespace vireo::testing
