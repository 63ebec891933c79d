// Behaviour that real clients rely on and vLLM has: several served model names, echo without
// generation (lm-eval-harness' prompt scoring), chat echo.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server_fixture.h"

using namespace vireo;
using namespace vireo::testing;
using nlohmann::json;

namespace {

json user_msg(const std::string& text) { return json::array({{{"role", "user"}, {"content", text}}}); }

std::string stream_text(const std::string& body, const char* field) {
  bool done = false;
  std::string text;
  for (const auto& c : parse_sse(body, &done))
    for (const auto& ch : c["choices"]) {
      if (std::string(field) == "text") text += ch["text"].get<std::string>();
      else if (ch["delta"].contains("content")) text += ch["delta"]["content"].get<std::string>();
    }
  EXPECT_TRUE(done);
  return text;
}

// Sends raw bytes and returns what comes back within 3 s.
std::string raw_exchange(int port, const std::string& request) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return "";
  if (write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) return "";
  timeval tv{3, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char buf[4096];
  ssize_t n = read(fd, buf, sizeof buf);
  close(fd);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

}  // namespace

TEST(VllmParity, EveryServedModelNameIsListedAndAccepted) {
  server::ServerOptions opts;
  opts.served_model_name = "main";
  opts.served_model_aliases = {"alias-a", "alias-b"};
  LiveServer srv(opts);
  auto cli = srv.client();
  json models = json::parse(cli.Get("/v1/models")->body);
  ASSERT_EQ(models["data"].size(), 3u) << models;
  EXPECT_EQ(models["data"][0]["id"], "main");
  EXPECT_EQ(models["data"][2]["id"], "alias-b");
  EXPECT_EQ(models["data"][1]["root"], models["data"][0]["root"]);
  // Any name is accepted; responses carry the first, as vLLM's model_name().
  for (const char* name : {"main", "alias-a", "alias-b", ""}) {
    SCOPED_TRACE(name);
    auto r = post_json(cli, "/v1/completions", {{"model", name}, {"prompt", "ab"}, {"max_tokens", 2}});
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(json::parse(r->body)["model"], "main");
  }
  auto r = post_json(cli, "/v1/chat/completions", {{"model", "alias-b"}, {"messages", user_msg("hi")}, {"max_tokens", 2}});
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["model"], "main");
  // An unknown one: vLLM's 404, naming the parameter.
  r = post_json(cli, "/v1/completions", {{"model", "gpt-4"}, {"prompt", "ab"}});
  ASSERT_EQ(r->status, 404);
  json e = json::parse(r->body)["error"];
  EXPECT_EQ(e["message"], "The model `gpt-4` does not exist.");
  EXPECT_EQ(e["type"], "NotFoundError");
  EXPECT_EQ(e["param"], "model");
  EXPECT_EQ(e["code"], 404);
}

TEST(VllmParity, EchoWithMaxTokensZeroReturnsThePromptAlone) {
  LiveServer srv;
  auto cli = srv.client();
  // lm-eval-harness' loglikelihood request: the prompt's own logprobs, nothing generated.
  auto r = post_json(cli, "/v1/completions",
                     {{"prompt", "hello"}, {"max_tokens", 0}, {"echo", true}, {"logprobs", 1}, {"temperature", 0}});
  ASSERT_EQ(r->status, 200) << r->body;
  json c = json::parse(r->body)["choices"][0];
  EXPECT_EQ(c["text"], "hello");
  // <bos> + 5 bytes: one entry per prompt token, the first without a logprob.
  json lp = c["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 6u) << lp;
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  EXPECT_EQ(lp["token_logprobs"][1], -1.0);
  EXPECT_EQ(lp["tokens"][5], "o");
  EXPECT_EQ(c["finish_reason"], "length");
  // Streamed: one chunk with the prompt.
  r = post_json(cli, "/v1/completions", {{"prompt", "hello"}, {"max_tokens", 0}, {"echo", true}, {"stream", true}});
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(stream_text(r->body, "text"), "hello");
  // Without echo, max_tokens 0 stays a 400 (vLLM's SamplingParams check).
  r = post_json(cli, "/v1/completions", {{"prompt", "hello"}, {"max_tokens", 0}});
  ASSERT_EQ(r->status, 400);
  EXPECT_EQ(json::parse(r->body)["error"]["param"], "max_tokens");
}

TEST(VllmParity, CompletionsMaxTokensNullRunsToTheContextEnd) {
  // vLLM: an explicit "max_tokens": null is None, i.e. up to max_model_len (an absent one is 16).
  LiveServer srv;  // max_model_len 256
  auto cli = srv.client();
  auto r = post_json(cli, "/v1/completions", {{"prompt", "hello"}, {"max_tokens", nullptr}, {"min_tokens", 300}});
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  EXPECT_EQ(j["usage"]["prompt_tokens"], 6);  // <bos> + 5 bytes
  EXPECT_EQ(j["usage"]["completion_tokens"], 250);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  r = post_json(cli, "/v1/completions", {{"prompt", "hello"}});
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["usage"]["completion_tokens"], 16);
  r = post_json(cli, "/v1/completions", {{"prompt", std::string(255, 'x')}, {"max_tokens", nullptr}});
  EXPECT_EQ(r->status, 400) << r->body;  // <bos> + 255 leaves no room for a token
}

TEST(VllmParity, ChatEchoPrependsTheMessageBeingContinued) {
  LiveServer srv;
  auto cli = srv.client();
  json msgs = user_msg("hi");
  msgs.push_back({{"role", "assistant"}, {"content", "Sure, "}});
  json body = {{"messages", msgs}, {"max_tokens", 3}, {"temperature", 0}, {"echo", true}, {"continue_final_message", true},
               {"add_generation_prompt", false}};
  auto r = post_json(cli, "/v1/chat/completions", body);
  ASSERT_EQ(r->status, 200) << r->body;
  const std::string content = json::parse(r->body)["choices"][0]["message"]["content"];
  ASSERT_EQ(content.rfind("Sure, ", 0), 0u) << content;
  EXPECT_EQ(content.size(), 6u + 3u);  // the echo, then 3 one-byte tokens
  body["stream"] = true;
  r = post_json(cli, "/v1/chat/completions", body);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(stream_text(r->body, "content"), content);
  // Under a generation prompt only an assistant message is echoed (the answer is the assistant's).
  r = post_json(cli, "/v1/chat/completions", {{"messages", user_msg("hi")}, {"max_tokens", 3}, {"temperature", 0}, {"echo", true}});
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["choices"][0]["message"]["content"].get<std::string>().size(), 3u);
}

// Fields clients send with their default values must not be refused where vLLM accepts them.
TEST(VllmParity, DefaultValuedFieldsAreAccepted) {
  LiveServer srv;
  auto cli = srv.client();
  // top_logprobs 0 is the field's default: vLLM needs logprobs only for a positive value.
  auto r = post_json(cli, "/v1/chat/completions", {{"messages", user_msg("hi")}, {"max_tokens", 2}, {"top_logprobs", 0}});
  EXPECT_EQ(r->status, 200) << r->body;
  r = post_json(cli, "/v1/chat/completions", {{"messages", user_msg("hi")}, {"max_tokens", 2}, {"top_logprobs", 1}});
  EXPECT_EQ(r->status, 400) << r->body;
  // best_of <= n asks for nothing more (LangChain's OpenAI LLM may send best_of 1 with n 2): ignored.
  r = post_json(cli, "/v1/completions", {{"prompt", "hi"}, {"max_tokens", 2}, {"n", 2}, {"best_of", 1}});
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["choices"].size(), 2u);
  // An empty stream_options without stream (falsy in vLLM's check); a non-empty one stays a 400.
  r = post_json(cli, "/v1/completions", {{"prompt", "hi"}, {"max_tokens", 2}, {"stream_options", json::object()}});
  EXPECT_EQ(r->status, 200) << r->body;
  r = post_json(cli, "/v1/chat/completions", {{"messages", user_msg("hi")}, {"max_tokens", 2}, {"stream_options", {{"include_usage", false}}}});
  EXPECT_EQ(r->status, 400) << r->body;
  // No tool calls: no tool_calls key (OpenAI's and vLLM's message), so clients testing for the key
  // do not take a plain answer for a tool-call turn.
  r = post_json(cli, "/v1/chat/completions", {{"messages", user_msg("hi")}, {"max_tokens", 2}});
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_FALSE(json::parse(r->body)["choices"][0]["message"].contains("tool_calls")) << r->body;
}

// Completions' add_special_tokens (vLLM's, default true): false tokenizes a text prompt without BOS
// (it was ignored). Token-id prompts are taken as sent either way; a non-boolean is a 400.
TEST(VllmParity, CompletionsAddSpecialTokens) {
  LiveServer srv;
  auto cli = srv.client();
  auto prompt_tokens = [&](json body) {
    body["max_tokens"] = 1;
    auto r = post_json(cli, "/v1/completions", body);
    EXPECT_EQ(r->status, 200) << r->body;
    return r->status == 200 ? json::parse(r->body)["usage"]["prompt_tokens"].get<int>() : -1;
  };
  EXPECT_EQ(prompt_tokens({{"prompt", "hi"}}), 3);  // <bos> h i
  EXPECT_EQ(prompt_tokens({{"prompt", "hi"}, {"add_special_tokens", true}}), 3);
  EXPECT_EQ(prompt_tokens({{"prompt", "hi"}, {"add_special_tokens", false}}), 2);
  EXPECT_EQ(prompt_tokens({{"prompt", {"hi", "abc"}}, {"add_special_tokens", false}}), 5);
  EXPECT_EQ(prompt_tokens({{"prompt", {104, 105}}, {"add_special_tokens", true}}), 2);
  auto r = post_json(cli, "/v1/completions",
                     {{"prompt", "hi"}, {"max_tokens", 1}, {"add_special_tokens", false}, {"echo", true}});
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["choices"][0]["text"].get<std::string>().rfind("hi", 0), 0u) << r->body;
  r = post_json(cli, "/v1/completions", {{"prompt", "hi"}, {"add_special_tokens", "no"}});
  ASSERT_EQ(r->status, 400) << r->body;
  EXPECT_EQ(json::parse(r->body)["error"]["param"], "add_special_tokens");
}

// reasoning_effort reaches the template, and "none" turns thinking off unless chat_template_kwargs
// says otherwise (vLLM's build_chat_params); other values are a 400.
TEST(VllmParity, ReasoningEffortSetsEnableThinking) {
  FakeEngineOptions eopts;
  eopts.chat_template =
      "{% for m in messages %}{{ m.content }}{% endfor %}["
      "{% if enable_thinking is defined %}{% if enable_thinking %}on{% else %}off{% endif %}{% else %}unset{% endif %}|"
      "{{ reasoning_effort if reasoning_effort is defined else 'unset' }}]";
  LiveServer srv({}, eopts);
  auto cli = srv.client();
  auto prompt = [&](json extra) {
    json body = {{"messages", user_msg("hi")}};
    body.update(extra);
    auto r = post_json(cli, "/tokenize", body);
    EXPECT_EQ(r->status, 200) << r->body;
    return json::parse(r->body)["tokens"];
  };
  auto text = [&](json tokens) {
    std::string s;
    for (int t : tokens) s += static_cast<char>(t);
    return s;
  };
  EXPECT_EQ(text(prompt(json::object())), "hi[unset|unset]");
  EXPECT_EQ(text(prompt({{"reasoning_effort", "none"}})), "hi[off|none]");
  EXPECT_EQ(text(prompt({{"reasoning_effort", "high"}})), "hi[on|high]");
  EXPECT_EQ(text(prompt({{"reasoning_effort", "none"}, {"chat_template_kwargs", {{"enable_thinking", true}}}})), "hi[on|none]");
  auto r = post_json(cli, "/v1/chat/completions", {{"messages", user_msg("hi")}, {"reasoning_effort", "extreme"}});
  ASSERT_EQ(r->status, 400);
  EXPECT_EQ(json::parse(r->body)["error"]["param"], "reasoning_effort");
}

// vLLM's chat `documents` reach the template as `documents` (they were dropped); chat_template_kwargs'
// own documents win, as vLLM updates the template's arguments with them.
TEST(VllmParity, DocumentsReachTheTemplate) {
  FakeEngineOptions eopts;
  eopts.chat_template =
      "{% if documents %}{% for d in documents %}<{{ d.title }}:{{ d.text }}>{% endfor %}{% endif %}"
      "{% for m in messages %}{{ m.content }}{% endfor %}";
  LiveServer srv({}, eopts);
  auto cli = srv.client();
  auto rendered = [&](const std::string& path, json extra) {
    json body = {{"messages", user_msg("hi")}};
    if (path != "/tokenize") body["max_tokens"] = 1;
    body.update(extra);
    auto r = post_json(cli, path, body);
    EXPECT_EQ(r->status, 200) << r->body;
    const json j = json::parse(r->body);
    std::string s;
    if (path == "/tokenize")
      for (int t : j["tokens"]) s += static_cast<char>(t);
    else
      s = std::to_string(j["usage"]["prompt_tokens"].get<int>());
    return s;
  };
  const json docs = json::array({{{"title", "a"}, {"text", "x"}}, {{"title", "b"}, {"text", "y"}}});
  EXPECT_EQ(rendered("/tokenize", json::object()), "hi");
  EXPECT_EQ(rendered("/tokenize", {{"documents", docs}}), "<a:x><b:y>hi");
  EXPECT_EQ(rendered("/tokenize", {{"documents", nullptr}}), "hi");
  EXPECT_EQ(rendered("/tokenize", {{"documents", docs}, {"chat_template_kwargs", {{"documents", {{{"title", "c"}, {"text", "z"}}}}}}}),
            "<c:z>hi");
  EXPECT_EQ(rendered("/v1/chat/completions", {{"documents", docs}}), std::to_string(std::string("<a:x><b:y>hi").size()));
  for (const json& bad : {json("x"), json::array({1}), json::array({{{"title", 5}}})}) {
    SCOPED_TRACE(bad.dump());
    auto r = post_json(cli, "/v1/chat/completions", {{"messages", user_msg("hi")}, {"documents", bad}});
    ASSERT_EQ(r->status, 400) << r->body;
    EXPECT_EQ(json::parse(r->body)["error"]["param"], "documents");
  }
}

// vLLM takes any message role (CustomChatCompletionMessageParam) and leaves it to the template:
// Llama 3's tool results come back as "ipython".
TEST(VllmParity, CustomRolesReachTheTemplate) {
  LiveServer srv;
  auto cli = srv.client();
  json msgs = user_msg("hi");
  msgs.push_back({{"role", "ipython"}, {"content", "42"}});
  auto r = post_json(cli, "/tokenize", {{"messages", msgs}});
  ASSERT_EQ(r->status, 200) << r->body;
  const json tokens = json::parse(r->body)["tokens"];
  std::string text;
  for (int t : tokens) text += static_cast<char>(t);
  EXPECT_EQ(text, "<user>hi\n<ipython>42\n<assistant>");
  r = post_json(cli, "/v1/chat/completions", {{"messages", msgs}, {"max_tokens", 2}});
  EXPECT_EQ(r->status, 200) << r->body;
}

// SageMaker's /invocations: chat for a body with messages, completions for one with a prompt, and an
// OpenAI-style 400 naming the expected request types for anything else (vLLM's invocations route).
TEST(VllmParity, InvocationsRouteByTheBodysShape) {
  LiveServer srv;
  auto cli = srv.client();
  auto r = post_json(cli, "/invocations", {{"messages", user_msg("hi")}, {"max_tokens", 2}});
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["object"], "chat.completion");
  r = post_json(cli, "/invocations", {{"prompt", "hi"}, {"max_tokens", 2}});
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["object"], "text_completion");
  // A null field is an absent one: this body is a completion request, not a chat without messages.
  r = post_json(cli, "/invocations", {{"messages", nullptr}, {"prompt", "hi"}, {"max_tokens", 2}});
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["object"], "text_completion");
  r = post_json(cli, "/invocations", {{"prompt", "hi"}, {"max_tokens", 2}, {"stream", true}});
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_NE(r->body.find("data: [DONE]"), std::string::npos);
  for (const json& bad : {json{{"input", "hi"}}, json::array({1, 2}), json{{"messages", "hi"}}, json{{"prompt", nullptr}}}) {
    SCOPED_TRACE(bad.dump());
    r = post_json(cli, "/invocations", bad);
    ASSERT_EQ(r->status, 400) << r->body;
    EXPECT_EQ(json::parse(r->body)["error"]["type"], "BadRequestError");
  }
  EXPECT_NE(json::parse(post_json(cli, "/invocations", {{"input", "hi"}})->body)["error"]["message"].get<std::string>().find(
                "ChatCompletionRequest"),
            std::string::npos);
  r = cli.Post("/invocations", "{not json", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
}

// SageMaker's health check: vLLM answers /ping on GET and POST like /health.
TEST(VllmParity, PingAnswersGetAndPost) {
  LiveServer srv({}, {}, /*load_engine=*/false);
  auto cli = srv.client();
  EXPECT_EQ(cli.Get("/ping")->status, 503);  // loading, as /health
  srv.load();
  EXPECT_EQ(cli.Get("/ping")->status, 200);
  EXPECT_EQ(cli.Head("/ping")->status, 200);
  auto r = cli.Post("/ping");  // no body, no Content-Type
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  r = cli.Post("/ping", "{}", "application/json");
  EXPECT_EQ(r->status, 200) << r->body;
  // curl -X POST sends neither Content-Length nor chunking: no body, answered at once (cpp-httplib
  // alone would wait for the peer to close).
  EXPECT_EQ(raw_exchange(srv.port(), "POST /ping HTTP/1.1\r\nHost: x\r\n\r\n").substr(0, 15), "HTTP/1.1 200 OK");
  r = cli.Put("/ping", "", "text/plain");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405);
  EXPECT_EQ(r->get_header_value("Allow"), "GET, POST");
  EXPECT_EQ(json::parse(r->body)["error"]["type"], "MethodNotAllowedError");
}

// vLLM's chat_utils turns an assistant turn's tool-call arguments (JSON text) into objects before the
// template renders them (empty: {}), drops an empty tool_calls list and fills reasoning_content from
// reasoning; arguments that are not JSON are a 400.
TEST(VllmParity, AssistantToolCallArgumentsReachTheTemplateAsObjects) {
  FakeEngineOptions eopts;
  eopts.chat_template =
      "{% for m in messages %}{{ m.role }}:{{ m.content }}"
      "{% if m.tool_calls is defined %}{% for c in m.tool_calls %}"
      "[{{ 'obj' if c.function.arguments is mapping else 'str' }} {{ c.function.arguments | tojson }}]"
      "{% endfor %}{% endif %}"
      "{% if m.reasoning_content is defined %}<r:{{ m.reasoning_content }}>{% endif %};{% endfor %}";
  LiveServer srv({}, eopts);
  auto cli = srv.client();
  auto render = [&](json assistant) -> std::pair<int, std::string> {
    json msgs = user_msg("w?");
    msgs.push_back(assistant);
    auto r = post_json(cli, "/tokenize", {{"messages", msgs}});
    if (r->status != 200) return {r->status, r->body};
    const json tokens = json::parse(r->body)["tokens"];
    std::string text;
    for (int t : tokens) text += static_cast<char>(t);
    return {200, text};
  };
  auto call = [](json args) { return json{{"id", "c1"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", args}}}}; };
  auto [status, text] = render({{"role", "assistant"}, {"content", nullptr},
                                {"tool_calls", {call("{\"city\": \"Paris\", \"n\": 2}"), call(""), call(nullptr)}}});
  ASSERT_EQ(status, 200) << text;
  EXPECT_EQ(text, "user:w?;assistant:[obj {\"city\": \"Paris\", \"n\": 2}][obj {}][obj {}];");
  std::tie(status, text) = render({{"role", "assistant"}, {"content", "hi"}, {"tool_calls", json::array()}, {"reasoning", "hmm"}});
  EXPECT_EQ(text, "user:w?;assistant:hi<r:hmm>;");
  std::tie(status, text) = render({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", {call("{oops")}}});
  EXPECT_EQ(status, 400) << text;
}

// vLLM's `--api-key a b`: any one of the keys is accepted.
TEST(VllmParity, SeveralApiKeys) {
  server::ServerOptions opts;
  opts.api_key = "sk-one";
  opts.more_api_keys = {"sk-two"};
  LiveServer srv(opts);
  auto cli = srv.client();
  for (const char* key : {"sk-one", "sk-two"}) {
    httplib::Headers h = {{"Authorization", std::string("Bearer ") + key}};
    EXPECT_EQ(cli.Get("/v1/models", h)->status, 200) << key;
  }
  httplib::Headers bad = {{"Authorization", "Bearer sk-three"}};
  auto r = cli.Get("/v1/models", bad);
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(json::parse(r->body)["error"]["type"], "AuthenticationError");
}

TEST(VllmParity, OutputChangingExtrasAtTheirDefaultsAreAccepted) {
  // Clients that copy vLLM's full request model send these with their defaults; only a value that
  // asks for the feature is refused (bad_input_test.cc).
  LiveServer srv;
  auto cli = srv.client();
  json extras = {{"use_beam_search", false}, {"bad_words", json::array()}, {"logits_processors", nullptr},
                 {"allowed_token_ids", nullptr}, {"length_penalty", 1.0}};
  json cmpl = {{"prompt", "hi"}, {"max_tokens", 2}};
  json chat = {{"messages", user_msg("hi")}, {"max_tokens", 2}};
  cmpl.update(extras);
  chat.update(extras);
  auto r = post_json(cli, "/v1/completions", cmpl);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  r = post_json(cli, "/v1/chat/completions", chat);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  // allowed_token_ids is supported (a token bitmask row; tests/engine/e2e_default_model_test.cc).
  r = post_json(cli, "/v1/completions", {{"prompt", "hi"}, {"max_tokens", 2}, {"allowed_token_ids", {97, 98, 98}}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
}

TEST(VllmParity, ReturnTokensAsTokenIds) {
  // vLLM's return_tokens_as_token_ids: every logprob token string is "token_id:<id>" (RL clients map
  // them back to ids); it was ignored, leaving decoded text. The byte tokenizer's ids are the bytes.
  LiveServer srv;
  auto cli = srv.client();
  auto id_of = [](char c) { return "token_id:" + std::to_string(static_cast<unsigned char>(c)); };
  auto r = post_json(cli, "/v1/completions", {{"prompt", {72, 105}}, {"max_tokens", 2}, {"echo", true}, {"logprobs", 2},
                                              {"return_tokens_as_token_ids", true}});
  ASSERT_EQ(r->status, 200) << r->body;
  json lp = json::parse(r->body)["choices"][0]["logprobs"];
  std::string text = "Hi" + FakeEngine::expected_text({72, 105}, 2);
  ASSERT_EQ(lp["tokens"].size(), 4u);
  size_t offset = 0;
  for (size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(lp["tokens"][k], id_of(text[k]));
    EXPECT_EQ(lp["text_offset"][k], offset);  // vLLM advances by the token string's length
    offset += id_of(text[k]).size();
  }
  for (const auto& [key, value] : lp["top_logprobs"][2].items()) EXPECT_EQ(key.rfind("token_id:", 0), 0u) << key;

  json chat = {{"messages", user_msg("hi")}, {"max_tokens", 3}, {"logprobs", true}, {"top_logprobs", 2},
               {"return_tokens_as_token_ids", true}};
  r = post_json(cli, "/v1/chat/completions", chat);
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  std::string content = j["choices"][0]["message"]["content"];
  json entries = j["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(entries.size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    const std::string token = id_of(content[k]);
    EXPECT_EQ(entries[k]["token"], token);
    EXPECT_EQ(entries[k]["bytes"], json(std::vector<int>(token.begin(), token.end())));
    for (const auto& top : entries[k]["top_logprobs"]) EXPECT_EQ(top["token"].get<std::string>().rfind("token_id:", 0), 0u);
  }
  chat["stream"] = true;
  r = post_json(cli, "/v1/chat/completions", chat);
  std::string streamed;
  for (const auto& c : parse_sse(r->body))
    for (const auto& ch : c["choices"])
      if (!ch["logprobs"].is_null())
        for (const auto& e : ch["logprobs"]["content"]) streamed += e["token"].get<std::string>() + " ";
  EXPECT_EQ(streamed, id_of(content[0]) + " " + id_of(content[1]) + " " + id_of(content[2]) + " ");

  chat["stream"] = false;
  chat["return_tokens_as_token_ids"] = false;  // the default: decoded text
  j = json::parse(post_json(cli, "/v1/chat/completions", chat)->body);
  EXPECT_EQ(j["choices"][0]["logprobs"]["content"][0]["token"], std::string(1, content[0]));
}

TEST(VllmParity, ForceIncludeUsage) {
  // vLLM's --enable-force-include-usage: a stream reports usage in a last chunk (empty choices) even when
  // the request asks for none; without the flag only stream_options.include_usage does.
  auto usage_chunks = [](LiveServer& srv, const std::string& path, json body) {
    auto cli = srv.client();
    auto r = post_json(cli, path, body);
    EXPECT_EQ(r->status, 200) << r->body;
    int n = 0;
    for (const auto& c : parse_sse(r->body))
      if (c.contains("usage") && !c["usage"].is_null() && c["choices"].empty()) ++n;
    return n;
  };
  const json chat = {{"messages", user_msg("hi")}, {"max_tokens", 3}, {"stream", true}};
  const json cmpl = {{"prompt", "hi"}, {"max_tokens", 3}, {"stream", true}};
  {
    LiveServer plain;
    EXPECT_EQ(usage_chunks(plain, "/v1/chat/completions", chat), 0);
    EXPECT_EQ(usage_chunks(plain, "/v1/completions", cmpl), 0);
  }
  server::ServerOptions o;
  o.enable_force_include_usage = true;
  LiveServer forced(o);
  EXPECT_EQ(usage_chunks(forced, "/v1/chat/completions", chat), 1);
  EXPECT_EQ(usage_chunks(forced, "/v1/completions", cmpl), 1);
  json off = chat;
  off["stream_options"] = {{"include_usage", false}};
  EXPECT_EQ(usage_chunks(forced, "/v1/chat/completions", off), 1);  // the flag wins, as in vLLM
}

TEST(VllmParity, RequestIdHeaders) {
  // vLLM's --enable-request-id-headers: X-Request-Id on every response, the client's own when it sent one.
  {
    LiveServer plain;
    auto cli = plain.client();
    auto r = post_json(cli, "/v1/completions", {{"prompt", "hi"}, {"max_tokens", 1}});
    EXPECT_FALSE(r->has_header("X-Request-Id"));
  }
  server::ServerOptions o;
  o.enable_request_id_headers = true;
  LiveServer srv(o);
  auto cli = srv.client();
  auto r = post_json(cli, "/v1/completions", {{"prompt", "hi"}, {"max_tokens", 1}});
  ASSERT_EQ(r->status, 200) << r->body;
  const std::string id = r->get_header_value("X-Request-Id");
  EXPECT_EQ(id.size(), 32u) << id;
  EXPECT_NE(post_json(cli, "/v1/completions", {{"prompt", "hi"}, {"max_tokens", 1}})->get_header_value("X-Request-Id"), id);
  r = cli.Post("/v1/completions", httplib::Headers{{"X-Request-Id", "mine-42"}}, R"({"prompt": "hi", "max_tokens": 1})",
               "application/json");
  EXPECT_EQ(r->get_header_value("X-Request-Id"), "mine-42");
  r = post_json(cli, "/v1/completions", {{"prompt", 5}});  // errors carry it too
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(r->get_header_value("X-Request-Id").size(), 32u);
  EXPECT_EQ(cli.Get("/health")->get_header_value("X-Request-Id").size(), 32u);
}

TEST(VllmParity, TruncatePromptTokensKeepsTheLastTokens) {
  // vLLM's truncate_prompt_tokens keeps the last N prompt tokens (-1: the context length); it was
  // ignored, so a long prompt sent with it was refused as over the context.
  LiveServer srv;  // max_model_len 256
  auto cli = srv.client();
  const std::string long_prompt(300, 'x');
  auto r = post_json(cli, "/v1/completions", {{"prompt", long_prompt}, {"max_tokens", 4}});
  EXPECT_EQ(r->status, 400) << r->body;
  r = post_json(cli, "/v1/completions", {{"prompt", long_prompt}, {"max_tokens", 4}, {"truncate_prompt_tokens", 100}});
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["usage"]["prompt_tokens"], 100);

  // "<bos>abcdefgh" cut to "fgh": the output follows the kept prompt, echo shows it.
  r = post_json(cli, "/v1/completions", {{"prompt", "abcdefgh"}, {"max_tokens", 3}, {"echo", true}, {"truncate_prompt_tokens", 3}});
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  EXPECT_EQ(j["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(j["choices"][0]["text"], "fgh" + FakeEngine::expected_text({'f', 'g', 'h'}, 3));
  // Token-id prompts too; a prompt already short enough is left alone.
  r = post_json(cli, "/v1/completions", {{"prompt", {97, 98, 99}}, {"max_tokens", 2}, {"truncate_prompt_tokens", -1}});
  EXPECT_EQ(json::parse(r->body)["usage"]["prompt_tokens"], 3);

  // Chat: the rendered prompt is cut (its start too, as vLLM).
  std::vector<int32_t> rendered = srv.engine().tokenizer().encode("<user>hello there\n<assistant>", false);
  std::vector<int32_t> kept(rendered.end() - 5, rendered.end());
  r = post_json(cli, "/v1/chat/completions",
                {{"messages", user_msg("hello there")}, {"max_tokens", 2}, {"truncate_prompt_tokens", 5}});
  ASSERT_EQ(r->status, 200) << r->body;
  j = json::parse(r->body);
  EXPECT_EQ(j["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(j["choices"][0]["message"]["content"], FakeEngine::expected_text(kept, 2));
}

TEST(VllmParity, ChatTemplateFlags) {
  // vLLM's --default-chat-template-kwargs (under the request's own kwargs), --exclude-tools-when-tool-choice-none
  // and --trust-request-chat-template, seen through /tokenize's render (the fake tokenizer: one id a byte).
  auto rendered = [](LiveServer& srv, const json& body) {
    auto cli = srv.client();
    auto r = post_json(cli, "/tokenize", body);
    if (r->status != 200) return std::to_string(r->status) + " " + r->body;
    const json j = json::parse(r->body);
    std::string text;
    for (int id : j["tokens"]) text += id < 256 ? std::string(1, static_cast<char>(id)) : "";
    return text;
  };
  const json tools = json::array({{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", {{"type", "object"}}}}}}});
  const std::string tpl =
      "{{ flavour }}|{{ size }}|{% if tools %}T{{ tools | length }}{% endif %}|{{ messages[0]['content'] }}";
  json body = {{"messages", user_msg("x")}, {"chat_template", tpl}};
  {
    LiveServer plain;  // no flags: a request's template is refused, as in vLLM
    const std::string got = rendered(plain, body);
    EXPECT_EQ(got.rfind("400 ", 0), 0u) << got;
    EXPECT_NE(got.find("--trust-request-chat-template"), std::string::npos) << got;
    EXPECT_NE(got.find("\"param\":\"chat_template\""), std::string::npos) << got;
  }
  server::ServerOptions o;
  o.limits.trust_request_chat_template = true;
  o.limits.default_chat_template_kwargs = {{"flavour", "mint"}, {"size", 2}};
  o.limits.exclude_tools_when_tool_choice_none = true;
  LiveServer srv(o);
  EXPECT_EQ(rendered(srv, body), "mint|2||x");
  json own = body;
  own["chat_template_kwargs"] = {{"size", 3}};  // the request's key wins over the default
  EXPECT_EQ(rendered(srv, own), "mint|3||x");
  json with_tools = body;
  with_tools["tools"] = tools;  // tool_choice absent: auto, the template lists them
  EXPECT_EQ(rendered(srv, with_tools), "mint|2|T1|x");
  with_tools["tool_choice"] = "none";
  EXPECT_EQ(rendered(srv, with_tools), "mint|2||x");
  json broken = body;
  broken["chat_template"] = "{% if %}";
  const std::string got = rendered(srv, broken);
  EXPECT_EQ(got.rfind("400 ", 0), 0u) << got;
  EXPECT_NE(got.find("\"param\":\"chat_template\""), std::string::npos) << got;
  // The server's own template still serves requests without one, with the default kwargs in its context.
  EXPECT_EQ(rendered(srv, {{"messages", user_msg("x")}}), "<user>x\n<assistant>");
}
