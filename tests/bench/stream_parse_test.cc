// Chunked transfer decoding and OpenAI SSE parsing, fed in arbitrary splits.
#include <gtest/gtest.h>

#include <cstdlib>

#include <nlohmann/json.hpp>

#include "bench/chunked_decoder.h"
#include "bench/openai_stream.h"
#include "bench/serve_bench.h"
#include "core/error.h"

using namespace vireo::bench;

namespace {
std::string chunk(const std::string& s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%zx\r\n", s.size());
  return buf + s + "\r\n";
}
}  // namespace

TEST(BenchChunked, DecodesAcrossAnySplit) {
  std::string wire = chunk("hello ") + chunk(std::string(300, 'x')) + chunk("!") + "0\r\n\r\nNEXT";
  std::string want = "hello " + std::string(300, 'x') + "!";
  for (size_t step : {1, 2, 3, 7, 64, 1000}) {
    ChunkedDecoder d;
    std::string out;
    size_t consumed = 0;
    for (size_t i = 0; i < wire.size() && !d.done(); i += step) {
      std::string_view piece(wire.data() + i, std::min(step, wire.size() - i));
      consumed += d.feed(piece, out);
    }
    EXPECT_TRUE(d.done()) << step;
    EXPECT_EQ(out, want) << step;
    EXPECT_EQ(wire.substr(consumed), "NEXT") << step;
  }
}

TEST(BenchChunked, ExtensionsAndTrailers) {
  ChunkedDecoder d;
  std::string out;
  d.feed("3;ext=1\r\nabc\r\n0\r\nX-Trailer: y\r\n\r\n", out);
  EXPECT_TRUE(d.done());
  EXPECT_EQ(out, "abc");
}

TEST(BenchChunked, RejectsGarbageSize) {
  ChunkedDecoder d;
  std::string out;
  EXPECT_THROW(d.feed("zz\r\n", out), vireo::Error);
}

TEST(BenchOpenAIStream, CompletionsTimingAndUsage) {
  RequestResult r;
  int done = 0;
  OpenAIStreamHandler h(Backend::kCompletions, &r, 10.0, [&] { ++done; });
  h.on_status(200, 10.0);
  std::string sse =
      "data: {\"choices\":[{\"index\":0,\"text\":\"Hel\"}]}\n\n"
      "data: {\"choices\":[{\"index\":0,\"text\":\"lo\"}]}\r\n\r\n"
      "data: {\"choices\":[{\"index\":0,\"text\":\"\"}]}\n\n"  // empty (text held back): still a token's chunk
      "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":3}}\n\n"
      "data: [DONE]\n\n";
  // Split mid-event: "Hel" arrives at 10.25, "lo" at 10.5, the rest at 10.75.
  size_t cut1 = sse.find("data: {\"choices\":[{\"index\":0,\"text\":\"lo");
  h.on_body(sse.substr(0, cut1 + 10), 10.25);
  h.on_body(sse.substr(cut1 + 10, 40), 10.5);
  h.on_body(sse.substr(cut1 + 50), 10.75);
  h.on_complete(11.0);
  EXPECT_EQ(done, 1);
  EXPECT_TRUE(r.success) << r.error;
  EXPECT_EQ(r.generated_text, "Hello");
  EXPECT_DOUBLE_EQ(r.ttft, 0.25);
  ASSERT_EQ(r.itl.size(), 2u);  // "lo", then the empty-text chunk (vllm bench serve times every chunk with choices)
  EXPECT_DOUBLE_EQ(r.itl[0], 0.25);
  EXPECT_DOUBLE_EQ(r.itl[1], 0.25);
  EXPECT_EQ(r.output_tokens, 3);
  EXPECT_DOUBLE_EQ(r.latency, 1.0);
}

// As vllm bench serve: the role chunk (which vLLM and Vireo send with the first token) is the first token.
TEST(BenchOpenAIStream, ChatRoleChunkIsTheFirstToken) {
  RequestResult r;
  OpenAIStreamHandler h(Backend::kChat, &r, 0.0, nullptr);
  h.on_status(200, 0.0);
  h.on_body("data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n", 0.1);
  h.on_body("data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n", 0.3);
  h.on_body("data: {\"choices\":[{\"delta\":{\"content\":\" there\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n", 0.4);
  h.on_complete(0.5);
  EXPECT_TRUE(r.success);
  EXPECT_DOUBLE_EQ(r.ttft, 0.1);
  ASSERT_EQ(r.itl.size(), 2u);
  EXPECT_DOUBLE_EQ(r.itl[0], 0.2);
  EXPECT_EQ(r.generated_text, "Hi there");
  EXPECT_EQ(r.output_tokens, 0);  // no usage given
}

TEST(BenchOpenAIStream, HttpErrorAndEmptyStreamFail) {
  RequestResult r;
  OpenAIStreamHandler h(Backend::kCompletions, &r, 0.0, nullptr);
  h.on_status(400, 0.0);
  h.on_body("{\"error\":{\"message\":\"bad\"}}", 0.1);
  h.on_complete(0.1);
  EXPECT_FALSE(r.success);
  EXPECT_NE(r.error.find("HTTP 400"), std::string::npos);
  EXPECT_NE(r.error.find("bad"), std::string::npos);

  RequestResult r2;
  OpenAIStreamHandler h2(Backend::kCompletions, &r2, 0.0, nullptr);
  h2.on_status(200, 0.0);
  h2.on_body("data: [DONE]\n\n", 0.1);
  h2.on_complete(0.1);
  EXPECT_FALSE(r2.success);
  EXPECT_FALSE(r2.error.empty());
}

TEST(BenchOpenAIStream, RequestBodies) {
  auto c = nlohmann::json::parse(build_request_body(Backend::kCompletions, "m", "p", 7, true));
  EXPECT_EQ(c["model"], "m");
  EXPECT_EQ(c["prompt"], "p");
  EXPECT_EQ(c["max_tokens"], 7);
  EXPECT_EQ(c["stream"], true);
  EXPECT_EQ(c["stream_options"]["include_usage"], true);
  EXPECT_EQ(c["ignore_eos"], true);
  EXPECT_EQ(c["temperature"], 0.0);
  auto ch = nlohmann::json::parse(build_request_body(Backend::kChat, "m", "p", 7, false));
  EXPECT_EQ(ch["messages"][0]["role"], "user");
  EXPECT_EQ(ch["messages"][0]["content"], "p");
  EXPECT_EQ(ch["max_completion_tokens"], 7);
  EXPECT_FALSE(ch.contains("ignore_eos"));
  EXPECT_EQ(parse_backend("vllm"), Backend::kCompletions);
  EXPECT_EQ(parse_backend("openai-chat"), Backend::kChat);
  EXPECT_THROW(parse_backend("tgi"), vireo::Error);
}

// vLLM bench serve's sampling flags and --extra-body: merged over the greedy defaults, --extra-body last.
TEST(BenchOpenAIStream, SamplingFlagsAndExtraBody) {
  ServeBenchArgs a;
  EXPECT_EQ(request_extra_body(a), "");
  a.temperature = 0.7;
  a.top_k = 20;
  a.extra_body = R"({"top_k": 5, "min_tokens": 3, "stream": true})";
  auto j = nlohmann::json::parse(build_request_body(Backend::kChat, "m", "p", 7, false, request_extra_body(a)));
  EXPECT_DOUBLE_EQ(j["temperature"].get<double>(), 0.7);
  EXPECT_EQ(j["top_k"], 5);
  EXPECT_EQ(j["min_tokens"], 3);
  EXPECT_EQ(j["max_completion_tokens"], 7);
  EXPECT_FALSE(j.contains("top_p"));
  a.extra_body = "[1]";
  EXPECT_THROW(request_extra_body(a), vireo::Error);
}

// --logprobs (completions: logprobs N; chat: logprobs true + top_logprobs N), --header pairs and
// $OPENAI_API_KEY as a Bearer token unless a --header names Authorization.
TEST(BenchOpenAIStream, LogprobsAndHeaders) {
  ServeBenchArgs a;
  a.logprobs = 3;
  auto c = nlohmann::json::parse(request_extra_body(a));
  EXPECT_EQ(c["logprobs"], 3);
  a.backend = "openai-chat";
  auto ch = nlohmann::json::parse(request_extra_body(a));
  EXPECT_EQ(ch["logprobs"], true);
  EXPECT_EQ(ch["top_logprobs"], 3);
  a.logprobs = -1;
  EXPECT_THROW(request_extra_body(a), vireo::Error);

  unsetenv("OPENAI_API_KEY");
  a.headers = {"X-A = 1", "X-B=two=2"};
  auto h = request_headers(a);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[0], (std::pair<std::string, std::string>{"X-A", "1"}));
  EXPECT_EQ(h[1], (std::pair<std::string, std::string>{"X-B", "two=2"}));
  setenv("OPENAI_API_KEY", "sek", 1);
  h = request_headers(a);
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h[2], (std::pair<std::string, std::string>{"Authorization", "Bearer sek"}));
  a.headers = {"authorization=Bearer other"};
  h = request_headers(a);
  ASSERT_EQ(h.size(), 1u);  // the flag's own Authorization wins
  unsetenv("OPENAI_API_KEY");
  a.headers = {"no-equals"};
  EXPECT_THROW(request_headers(a), vireo::Error);
}

namespace {
// The fast chunk parser must agree with the nlohmann one whenever it decides.
void expect_same(const std::string& payload, Backend b, bool must_decide) {
  StreamChunk fast, ref;
  bool decided = parse_stream_chunk_fast(payload, b, fast);
  parse_stream_chunk_json(payload, b, ref);
  if (must_decide) EXPECT_TRUE(decided) << payload;
  if (!decided) return;
  EXPECT_EQ(ref.kind, StreamChunk::Kind::kData) << "fast path accepted what nlohmann rejects: " << payload;
  EXPECT_EQ(fast.has_tokens, ref.has_tokens) << payload;
  if (ref.has_tokens) EXPECT_EQ(fast.tokens, ref.tokens) << payload;
  EXPECT_EQ(fast.has_choices, ref.has_choices) << payload;
  EXPECT_EQ(fast.has_text, ref.has_text) << payload;
  EXPECT_EQ(fast.text, ref.text) << payload;
}
}  // namespace

TEST(BenchStreamChunk, FastParserAgreesWithNlohmann) {
  const char* completions[] = {
      R"({"choices":[{"index":0,"text":"Hel"}]})",
      R"({"id":"x","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" a\"b\\c\/\n\t\u00e9\ud83d\ude00","logprobs":null,"finish_reason":null}],"usage":null})",
      R"({"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}})",
      R"({"choices":[],"usage":{"completion_tokens":3.0}})",
      R"({"choices":[],"usage":{"completion_tokens":-2}})",
      R"({"choices":[],"usage":{"completion_tokens":"3"}})",
      R"({"choices":[],"usage":[1,2]})",
      R"({"choices":[{"text":null}]})",
      R"({"choices":[{"text":""}]})",
      R"({"choices":[{"text":"a"},{"text":"b"}]})",
      R"({"choices":["x",{"text":"b"}]})",
      R"({"choices":{"text":"a"}})",
      R"({"choices":[{"text":"a","text":"b"}]})",
      R"({"choices":[{"text":"a"}],"choices":[]})",
      R"({"usage":{"completion_tokens":4},"usage":{}})",
      " \t{ \"choices\" : [ { \"text\" : \"sp\" } ] , \"x\" : [ true , false , null , 1e5 , -0.5E-3 , {} , [] ] } \r\n",
      "{\"choices\":[{\"text\":\"\xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80\"}]}",
  };
  for (const char* p : completions) expect_same(p, Backend::kCompletions, true);
  const char* chat[] = {
      R"({"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]})",
      R"({"choices":[{"delta":{"content":"Hi"},"finish_reason":null}]})",
      R"({"choices":[{"delta":{"content":null,"reasoning_content":"think"}}]})",
      R"({"choices":[{"delta":{"reasoning_content":"think","content":"say"}}]})",
      R"({"choices":[{"delta":{"content":1}}]})",
      R"({"choices":[{"delta":"x"}]})",
      R"({"choices":[{"text":"completions field"}]})",
  };
  for (const char* p : chat) expect_same(p, Backend::kChat, true);
  // Undecided or invalid: the fast path must defer, never disagree.
  const char* odd[] = {
      R"({"error":{"message":"bad"}})", R"({"choices":[{"te\u0078t":"esc key"}]})", R"([1,2])", R"("s")",
      R"({"choices":[{"text":"a"}]} x)", R"({"choices":[{"text":"\ud800"}]})", R"({"choices":[{"text":"\udc00x"}]})",
      "{\"choices\":[{\"text\":\"\x01\"}]}", "{\"choices\":[{\"text\":\"\xc0\x80\"}]}",
      "{\"choices\":[{\"text\":\"\xed\xa0\x80\"}]}", "{\"choices\":[{\"text\":\"\xf4\x90\x80\x80\"}]}",
      R"({"choices":[],"usage":{"completion_tokens":12345678901}})", R"({"a":01})", R"({"a":1.})", R"({"a":.5})",
      R"({"a":-})", R"({"a":tru})", R"({"a":1,})", R"({,})", R"({"a" 1})", R"({"a":"\x"})", "", "{",
  };
  for (const char* p : odd) {
    expect_same(p, Backend::kCompletions, false);
    expect_same(p, Backend::kChat, false);
  }
  // Every prefix and many single-byte corruptions of valid chunks.
  std::string base[] = {
      R"({"choices":[{"index":0,"text":"x\u00e9\ud83d\ude00y","logprobs":null}],"usage":{"completion_tokens":12}})",
      R"({"choices":[{"delta":{"content":"Hi \"q\"","reasoning_content":null}}],"usage":null})",
  };
  const char repl[] = {'"', '\\', '{', '}', '[', ']', ',', ':', 'u', '0', '-', '.', 'e', ' ', '\x80', '\xff', 'n'};
  for (const auto& b : base) {
    for (size_t n = 0; n <= b.size(); ++n) {
      expect_same(b.substr(0, n), Backend::kCompletions, false);
      expect_same(b.substr(0, n), Backend::kChat, false);
    }
    for (size_t i = 0; i < b.size(); ++i) {
      for (char r : repl) {
        std::string m = b;
        m[i] = r;
        expect_same(m, Backend::kCompletions, false);
        expect_same(m, Backend::kChat, false);
      }
    }
  }
}

TEST(BenchOpenAIStream, ErrorAndMalformedChunks) {
  RequestResult r;
  OpenAIStreamHandler h(Backend::kCompletions, &r, 0.0, nullptr);
  h.on_status(200, 0.0);
  h.on_body("data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: {\"error\":{\"message\":\"boom\"}}\n\n", 0.1);
  h.on_complete(0.2);
  EXPECT_FALSE(r.success);
  EXPECT_EQ(r.error, "\"boom\"");

  RequestResult r2;
  OpenAIStreamHandler h2(Backend::kCompletions, &r2, 0.0, nullptr);
  h2.on_status(200, 0.0);
  h2.on_body("data: {\"choices\":[{\"text\":\"a\"}]\n\n", 0.1);
  h2.on_complete(0.2);
  EXPECT_FALSE(r2.success);
  EXPECT_EQ(r2.error.rfind("malformed stream chunk: ", 0), 0u) << r2.error;
}
