// The request field "priority" (vLLM): passed to the engine with --scheduling-policy priority; with fcfs
// only 0 is accepted (vLLM's 400 and message); a non-integer is a 400 on every endpoint.
#include <gtest/gtest.h>

#include "server_fixture.h"

namespace vireo::testing {
namespace {

using json = nlohmann::json;

FakeEngineOptions with_policy(const std::string& policy) {
  FakeEngineOptions o;
  o.scheduling_policy = policy;
  return o;
}

// A body for `path` that generates two tokens, with `priority` set to the given JSON value.
json body_for(const std::string& path, const json& priority) {
  json b = {{"max_tokens", 2}, {"priority", priority}};
  if (path == "/v1/completions") {
    b["prompt"] = "hi";
  } else if (path == "/v1/chat/completions") {
    b["messages"] = json::array({{{"role", "user"}, {"content", "hi"}}});
  } else {
    b.erase("max_tokens");
    b["input"] = "hi";
    b["max_output_tokens"] = 2;
  }
  return b;
}

const char* const kPaths[] = {"/v1/completions", "/v1/chat/completions", "/v1/responses"};

TEST(Priority, PassedToTheEngineWithThePriorityPolicy) {
  LiveServer srv({}, with_policy("priority"));
  auto cli = srv.client();
  for (const char* path : kPaths) {
    SCOPED_TRACE(path);
    for (int64_t priority : {int64_t{-5}, int64_t{0}, int64_t{7}, int64_t{1} << 40}) {
      auto r = post_json(cli, path, body_for(path, priority));
      ASSERT_EQ(r->status, 200) << r->body;
      EXPECT_EQ(srv.engine().last_params().priority, priority);
    }
  }
  auto r = post_json(cli, "/v1/completions", {{"prompt", "hi"}, {"max_tokens", 2}});
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(srv.engine().last_params().priority, 0);  // the default
}

TEST(Priority, NonZeroIsRefusedWithFcfs) {
  LiveServer srv;  // --scheduling-policy fcfs, the default
  auto cli = srv.client();
  for (const char* path : kPaths) {
    SCOPED_TRACE(path);
    auto r = post_json(cli, path, body_for(path, 3));
    ASSERT_EQ(r->status, 400) << r->body;
    const json e = json::parse(r->body)["error"];
    EXPECT_EQ(e["message"], "Got priority 3 but Priority scheduling is not enabled.");
    EXPECT_EQ(e["type"], "BadRequestError");
    EXPECT_EQ(e["param"], "priority");
    EXPECT_EQ(e["code"], 400);
    EXPECT_EQ(post_json(cli, path, body_for(path, 0))->status, 200);  // 0 asks for nothing
    EXPECT_EQ(post_json(cli, path, body_for(path, nullptr))->status, 200);
  }
  EXPECT_EQ(srv.engine().num_added(), 6u);  // only the accepted ones reached the engine
}

TEST(Priority, NonIntegerIs400) {
  for (const char* policy : {"fcfs", "priority"}) {
    SCOPED_TRACE(policy);
    LiveServer srv({}, with_policy(policy));
    auto cli = srv.client();
    for (const char* path : kPaths) {
      SCOPED_TRACE(path);
      for (const json& bad : {json(1.5), json("high"), json(true), json::array({1})}) {
        auto r = post_json(cli, path, body_for(path, bad));
        ASSERT_EQ(r->status, 400) << bad.dump() << " " << r->body;
        const json e = json::parse(r->body)["error"];
        EXPECT_EQ(e["type"], "BadRequestError");
        EXPECT_EQ(e["param"], "priority");
        EXPECT_EQ(e["message"], "'priority' must be an integer");
      }
    }
    EXPECT_EQ(srv.engine().num_added(), 0u);
  }
}

}  // namespace
}  // namespace vireo::testing
