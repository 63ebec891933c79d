// Runs the node scripts of this folder (official openai client) against a live `vireo serve`
// with the real engine (default model, CPU unless told otherwise). Without node or the openai package
// it runs the stdlib-Python stand-in tools/parity/serve_check.py instead (skips without python3 too).
//
// Environment (all optional):
//   VIREO_E2E_SERVE_ARGS  extra `vireo serve` arguments, whitespace separated, appended to both
//                         servers, e.g. "--device cuda" or "--device cuda --dtype float32"
//                         (do not repeat the flags set below)
//   VIREO_E2E_PREEMPT_KV_BYTES  KV cache of the preemption server (default: ~10 blocks of the default
//                         model: 700000 in fp32, 350000 with --device cuda unless --dtype float32);
//                         set it when VIREO_E2E_SERVE_ARGS picks another --model
//   VIREO_E2E_CLIENT      auto (default) | node | python
//   VIREO_E2E_VIREO       the vireo binary (default: <build>/vireo, else ./build/vireo)
//   VIREO_E2E_SOURCE_DIR  the source tree (default: the configured one, else the current directory)
//   VIREO_E2E_NODE / VIREO_E2E_PYTHON  interpreters (default node / python3)
//   VIREO_E2E_TIMEOUT_MS  per-request client timeout (default 120000)
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  int port = ntohs(a.sin_port);
  close(fd);
  return port;
}

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

// The source tree: env, else the configured path when it exists (it does not on the device, where
// the bundle runs from another checkout), else the current directory.
std::string source_dir() {
  if (const char* v = std::getenv("VIREO_E2E_SOURCE_DIR"); v && *v) return v;
  if (std::filesystem::exists(std::string(VIREO_SOURCE_DIR) + "/tests/server_e2e/common.js")) return VIREO_SOURCE_DIR;
  return std::filesystem::current_path().string();
}

std::string vireo_binary() {
  if (const char* v = std::getenv("VIREO_E2E_VIREO"); v && *v) return v;
  std::string b = std::string(VIREO_BINARY_DIR) + "/vireo";
  if (std::filesystem::exists(b)) return b;
  return source_dir() + "/build/vireo";
}

std::vector<std::string> split_ws(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::vector<std::string> extra_serve_args() { return split_ws(env_or("VIREO_E2E_SERVE_ARGS", "")); }

// The value after `flag` in the extra serve args ("" when absent).
std::string extra_flag(const std::string& flag) {
  auto a = extra_serve_args();
  for (size_t i = 0; i + 1 < a.size(); ++i)
    if (a[i] == flag) return a[i + 1];
  for (auto& w : a)
    if (w.rfind(flag + "=", 0) == 0) return w.substr(flag.size() + 1);
  return "";
}

// A KV cache of ~10 blocks of 16 tokens for the default model (4 layers, 2 KV heads, head dim 64):
// 64 KiB a block in fp32 (the CPU), 32 KiB in bf16/fp16 (CUDA's default activation dtype).
std::string preempt_kv_bytes() {
  if (const char* v = std::getenv("VIREO_E2E_PREEMPT_KV_BYTES"); v && *v) return v;
  const std::string device = extra_flag("--device"), dtype = extra_flag("--dtype");
  // The CPU backend keeps fp32 whatever --dtype says.
  const bool half = device == "cuda" && dtype != "float32" && dtype != "float";
  return half ? "350000" : "700000";
}

bool have_node() {
  const std::string client = env_or("VIREO_E2E_CLIENT", "auto");
  if (client == "python") return false;
  return std::system((env_or("VIREO_E2E_NODE", "node") + " --version > /dev/null 2>&1").c_str()) == 0 &&
         std::filesystem::exists(source_dir() + "/tools/npm/node_modules/openai/package.json");
}

bool have_python() {
  if (env_or("VIREO_E2E_CLIENT", "auto") == "node") return false;
  return std::system((env_or("VIREO_E2E_PYTHON", "python3") + " --version > /dev/null 2>&1").c_str()) == 0 &&
         std::filesystem::exists(source_dir() + "/tools/parity/serve_check.py");
}

class ServeProcess {
 public:
  explicit ServeProcess(std::vector<std::string> extra) {
    port_ = free_port();
    std::vector<std::string> args = {vireo_binary(), "serve", "--host", "127.0.0.1", "--port",
                                     std::to_string(port_), "--shutdown-timeout", "5"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto env_args = extra_serve_args();
    args.insert(args.end(), env_args.begin(), env_args.end());
    std::string line;
    for (auto& a : args) line += " " + a;
    std::fprintf(stderr, "[e2e] starting:%s\n", line.c_str());
    pid_ = fork();
    if (pid_ == 0) {
      std::vector<char*> argv;
      for (auto& s : args) argv.push_back(s.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  ~ServeProcess() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  // Waits for /health 200 (the listener answers 503 while the model loads).
  bool wait_healthy(std::chrono::seconds limit) {
    httplib::Client cli(url());
    if (!ca_file_.empty()) cli.set_ca_cert_path(ca_file_.c_str());
    cli.set_connection_timeout(1, 0);
    bool saw_503 = false;
    auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        return false;
      }
      if (auto r = cli.Get("/health")) {
        if (r->status == 200) return true;
        saw_503 |= r->status == 503;
      }
      std::this_thread::sleep_for(200ms);
    }
    return false;
  }
  // SIGTERM; returns the exit status (-1 if it did not exit in time).
  int terminate(std::chrono::seconds limit) {
    kill(pid_, SIGTERM);
    auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(50ms);
    }
    return -1;
  }
  std::string url() const { return (ca_file_.empty() ? "http://" : "https://") + host_ + ":" + std::to_string(port_); }
  // A server started with --ssl-certfile: its URL is https://localhost:port, checked against ca_file.
  void expect_tls(const std::string& ca_file) {
    ca_file_ = ca_file;
    host_ = "localhost";
  }

 private:
  std::string ca_file_, host_ = "127.0.0.1";
  pid_t pid_ = -1;
  int port_ = 0;
  bool exited_ = false;
};

int run_node(const std::string& script, const std::string& url, const std::string& env = "") {
  std::string cmd = env + " VIREO_URL=" + url + " VIREO_E2E_TIMEOUT_MS=" + env_or("VIREO_E2E_TIMEOUT_MS", "120000") + " " +
                    env_or("VIREO_E2E_NODE", "node") + " " + source_dir() + "/tests/server_e2e/" + script;
  int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// The Python stand-in for the node scripts: `checks` is basic or preemption.
int run_python(const std::string& checks, const std::string& url) {
  const std::string timeout_s = std::to_string(std::stoi(env_or("VIREO_E2E_TIMEOUT_MS", "120000")) / 1000);
  std::string cmd = env_or("VIREO_E2E_PYTHON", "python3") + " " + source_dir() + "/tools/parity/serve_check.py --url " +
                    url + " --checks " + checks + " --timeout " + timeout_s;
  int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

}  // namespace

TEST(ServerE2E, OpenAIClientAgainstDefaultModel) {
  const bool node = have_node();
  if (!node && !have_python()) GTEST_SKIP() << "neither node + tools/npm/node_modules/openai nor python3";
  ServeProcess srv({"--max-model-len", "512", "--max-num-seqs", "64"});
  ASSERT_TRUE(srv.wait_healthy(300s)) << "vireo serve did not become healthy";
  EXPECT_EQ(node ? run_node("basic.js", srv.url()) : run_python("basic", srv.url()), 0);
  EXPECT_EQ(srv.terminate(60s), 0);
}

// HTTPS as `vllm serve --ssl-certfile --ssl-keyfile` serves it, with the official client trusting the test's
// self-signed certificate (tests/fixtures/tls) through NODE_EXTRA_CA_CERTS.
TEST(ServerE2E, HttpsWithTheOpenAIClient) {
  if (!have_node()) GTEST_SKIP() << "node + tools/npm/node_modules/openai needed";
  const std::string tls = source_dir() + "/tests/fixtures/tls/";
  ServeProcess srv({"--max-model-len", "512", "--max-num-seqs", "8", "--ssl-certfile", tls + "cert.pem", "--ssl-keyfile",
                    tls + "key.pem"});
  srv.expect_tls(tls + "cert.pem");
  ASSERT_TRUE(srv.wait_healthy(300s)) << "vireo serve did not become healthy over https";
  EXPECT_EQ(run_node("https.js", srv.url(), "NODE_EXTRA_CA_CERTS=" + tls + "cert.pem"), 0);
  EXPECT_EQ(srv.terminate(60s), 0);
}

TEST(ServerE2E, StructuredOutputs) {
  if (!have_node()) GTEST_SKIP() << "node + tools/npm/node_modules/openai needed (no Python stand-in for these checks)";
  ServeProcess srv({"--max-model-len", "1024", "--max-num-seqs", "16"});
  ASSERT_TRUE(srv.wait_healthy(300s)) << "vireo serve did not become healthy";
  EXPECT_EQ(run_node("structured.js", srv.url()), 0);
  EXPECT_EQ(srv.terminate(60s), 0);
}

TEST(ServerE2E, ResponsesApi) {
  if (!have_node()) GTEST_SKIP() << "node + tools/npm/node_modules/openai needed (no Python stand-in for these checks)";
  ServeProcess srv({"--max-model-len", "1024", "--max-num-seqs", "16"});
  ASSERT_TRUE(srv.wait_healthy(300s)) << "vireo serve did not become healthy";
  EXPECT_EQ(run_node("responses.js", srv.url()), 0);
  EXPECT_EQ(srv.terminate(60s), 0);
}

TEST(ServerE2E, AnthropicMessagesApi) {
  if (!have_node() || !std::filesystem::exists(source_dir() + "/tools/npm/node_modules/@anthropic-ai/sdk/package.json"))
    GTEST_SKIP() << "node + tools/npm/node_modules/@anthropic-ai/sdk needed";
  ServeProcess srv({"--max-model-len", "1024", "--max-num-seqs", "16"});
  ASSERT_TRUE(srv.wait_healthy(300s)) << "vireo serve did not become healthy";
  EXPECT_EQ(run_node("anthropic.js", srv.url()), 0);
  EXPECT_EQ(srv.terminate(60s), 0);
}

TEST(ServerE2E, EmbeddingsWithThePoolingRunner) {
  if (!have_node()) GTEST_SKIP() << "node + tools/npm/node_modules/openai needed (no Python stand-in for these checks)";
  ServeProcess srv({"--max-model-len", "512", "--max-num-seqs", "16", "--runner", "pooling"});
  ASSERT_TRUE(srv.wait_healthy(300s)) << "vireo serve did not become healthy";
  EXPECT_EQ(run_node("embeddings.js", srv.url()), 0);
  EXPECT_EQ(srv.terminate(60s), 0);
}

TEST(ServerE2E, RealClientHabits) {
  if (!have_node()) GTEST_SKIP() << "node + tools/npm/node_modules/openai needed (no Python stand-in for these checks)";
  ServeProcess srv({"--max-model-len", "512", "--max-num-seqs", "16", "--served-model-name", "main", "alias"});
  ASSERT_TRUE(srv.wait_healthy(300s)) << "vireo serve did not become healthy";
  EXPECT_EQ(run_node("clients.js", srv.url()), 0);
  EXPECT_EQ(srv.terminate(60s), 0);
}

TEST(ServerE2E, SmallKvCacheForcesPreemptionWithIdenticalOutputs) {
  const bool node = have_node();
  if (!node && !have_python()) GTEST_SKIP() << "neither node + tools/npm/node_modules/openai nor python3";
  // max_model_len 128 = 8 blocks of 16; the cache holds a little more than one full sequence.
  ServeProcess srv({"--max-model-len", "128", "--block-size", "16", "--kv-cache-memory-bytes", preempt_kv_bytes(),
                    "--no-enable-prefix-caching"});
  ASSERT_TRUE(srv.wait_healthy(300s)) << "vireo serve did not become healthy";
  EXPECT_EQ(node ? run_node("preemption.js", srv.url()) : run_python("preemption", srv.url()), 0);
  EXPECT_EQ(srv.terminate(60s), 0);
}

// --max-logprobs (vLLM's flag) caps what a request may ask for; above the samplers' 20 the server does
// not start.
TEST(ServerE2E, MaxLogprobsFlag) {
  ServeProcess srv({"--max-logprobs", "2"});
  ASSERT_TRUE(srv.wait_healthy(300s)) << "vireo serve did not become healthy";
  httplib::Client cli(srv.url());
  cli.set_read_timeout(120, 0);
  auto post = [&](const std::string& path, const std::string& body) {
    auto r = cli.Post(path, body, "application/json");
    return r ? r->status : -1;
  };
  EXPECT_EQ(post("/v1/completions", R"({"prompt":"hi","max_tokens":1,"logprobs":2})"), 200);
  EXPECT_EQ(post("/v1/completions", R"({"prompt":"hi","max_tokens":1,"logprobs":3})"), 400);
  EXPECT_EQ(post("/v1/completions", R"({"prompt":"hi","max_tokens":1,"prompt_logprobs":3})"), 400);
  EXPECT_EQ(post("/v1/chat/completions",
                 R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":1,"logprobs":true,"top_logprobs":3})"),
            400);
  EXPECT_EQ(srv.terminate(60s), 0);
  ServeProcess over({"--max-logprobs", "21"});
  EXPECT_FALSE(over.wait_healthy(60s)) << "--max-logprobs 21 must stop the server at start-up";
}

// vLLM's --kv-cache-dtype fp8 on a live server: it starts, serves a streamed and a plain completion of the
// same greedy request with the same text (the cache's codes are the same whichever way the tokens go out);
// fp8_e5m2 stops the server at start-up.
TEST(ServerE2E, Fp8KvCacheFlag) {
  ServeProcess srv({"--kv-cache-dtype", "fp8", "--max-model-len", "512"});
  ASSERT_TRUE(srv.wait_healthy(300s)) << "vireo serve --kv-cache-dtype fp8 did not become healthy";
  httplib::Client cli(srv.url());
  cli.set_read_timeout(120, 0);
  const std::string body = R"({"prompt":"The capital of France is","max_tokens":8,"temperature":0)";
  auto r = cli.Post("/v1/completions", body + "}", "application/json");
  ASSERT_TRUE(r && r->status == 200) << (r ? r->body : std::string("no response"));
  const std::string text = nlohmann::json::parse(r->body)["choices"][0]["text"];
  auto st = cli.Post("/v1/completions", body + R"(,"stream":true})", "application/json");
  ASSERT_TRUE(st && st->status == 200);
  std::string streamed;
  std::istringstream lines(st->body);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("data: {", 0) != 0) continue;
    const auto chunk = nlohmann::json::parse(line.substr(6), nullptr, false);
    if (chunk.is_object() && !chunk["choices"].empty()) streamed += chunk["choices"][0].value("text", "");
  }
  EXPECT_EQ(streamed, text);
  EXPECT_EQ(srv.terminate(60s), 0);
  ServeProcess e5m2({"--kv-cache-dtype", "fp8_e5m2"});
  EXPECT_FALSE(e5m2.wait_healthy(60s)) << "--kv-cache-dtype fp8_e5m2 must stop the server at start-up";
}

// vLLM flags that have no counterpart here start the server (no effect, or the one value vireo has:
// expert parallelism on one device, the dotted structured-outputs backend, the graphs' size cap), and the
// ones it cannot honour stop it at start-up with their reason instead of running without them.
TEST(ServerE2E, VllmFlagsWithoutCounterpart) {
  ServeProcess srv({"-ep", "--structured-outputs-config.backend", "xgrammar", "--config-format", "hf",
                    "--mm-processor-cache-gb", "0", "--kv-sharing-fast-prefill", "--max-cudagraph-capture-size", "64",
                    "--otlp-traces-endpoint", "localhost:4317", "--safetensors-load-strategy", "eager",
                    "--mm-encoder-tp-mode", "data", "--skip-mm-profiling", "--attention-backend", "FLASH_ATTN",
                    "--model-loader-extra-config", "{}", "--max-model-len", "512"});
  ASSERT_TRUE(srv.wait_healthy(300s)) << "vireo serve did not start with vLLM's no-effect flags";
  EXPECT_EQ(srv.terminate(60s), 0);
  for (const std::vector<std::string>& refused :
       {std::vector<std::string>{"--config-format", "mistral"}, {"--kv-transfer-config", "{}"},
        {"--structured-outputs-config.backend", "unknown"}, {"--max-cudagraph-capture-size", "-1"},
        {"--safetensors-load-strategy", "bogus"}, {"--model-loader-extra-config", "[1]"},
        {"--ssl-certfile", "/nonexistent.pem"}}) {
    ServeProcess p(refused);
    EXPECT_FALSE(p.wait_healthy(60s)) << refused[0] << " " << refused[1] << " must stop the server at start-up";
  }
}

// vLLM's CORS flag is --allow-credentials (--allowed-credentials, vireo's first spelling, still works); a JSON
// list of origins as vLLM takes it; and a vLLM v0.18 deployment command line (data-parallel rank 0 of 1 by its
// short names, plugins and observability flags without effect, --no-X forms of boolean flags) starts the
// server, while the values vireo cannot honour stop it at start-up.
TEST(ServerE2E, VllmCorsAndDeploymentFlags) {
  for (const char* credentials : {"--allow-credentials", "--allowed-credentials"}) {
    ServeProcess srv({credentials, "--allowed-origins", R"(["http://a.example", "http://b.example"])", "-asc", "1",
                      "-dp", "1", "-dpn", "0", "-dpr", "0", "-dpl", "1", "-dpa", "127.0.0.1", "-dpp", "13345",
                      "--nnodes", "1", "--node-rank", "0", "--disable-access-log-for-endpoints", "/health,/metrics",
                      "--log-config-file", "/nonexistent.json", "--tool-parser-plugin", "plugin.py",
                      "--show-hidden-metrics-for-version", "0.17", "--additional-config", "{}", "-ac",
                      R"({"backend": "FLASH_ATTN"})", "--kv-events-config", R"({"enable_kv_cache_events": false})",
                      "--enable-eplb", "--stream-interval", "1", "--no-enable-log-requests",
                      "--no-trust-remote-code", "--no-enable-auto-tool-choice", "--max-model-len", "512"});
    ASSERT_TRUE(srv.wait_healthy(300s)) << "vireo serve refused a vLLM deployment command line with " << credentials;
    httplib::Client cli(srv.url());
    auto r = cli.Get("/v1/models", {{"Origin", "http://b.example"}});
    ASSERT_TRUE(r && r->status == 200);
    EXPECT_EQ(r->get_header_value("Access-Control-Allow-Origin"), "http://b.example");
    EXPECT_EQ(r->get_header_value("Access-Control-Allow-Credentials"), "true") << credentials;
    EXPECT_EQ(srv.terminate(60s), 0);
  }
  for (const std::vector<std::string>& refused :
       {std::vector<std::string>{"--headless"}, {"-dpr", "1"}, {"--nnodes", "2"}, {"-asc", "0"},
        {"--middleware", "my.module.auth"}, {"--tool-server", "demo"}, {"--enable-prompt-embeds"},
        {"--kv-events-config", R"({"enable_kv_cache_events": true})"}, {"--grpc"}, {"-dcp", "2"}}) {
    ServeProcess p(refused);
    EXPECT_FALSE(p.wait_healthy(60s)) << refused[0] << " must stop the server at start-up";
  }
}

// A flag given twice takes its last value, as with vLLM's argparse (wrapper scripts append overrides), also
// -O next to --compilation-config; list flags keep all their values; a long flag's name may use underscores
// (vLLM's FlexibleArgumentParser), a dotted sub-key keeps its own.
// A --config file's value yields to the command line's, spelt either way.
TEST(ServerE2E, RepeatedFlagTakesTheLastValue) {
  const std::string yaml = (std::filesystem::temp_directory_path() / ("vireo_e2e_" + std::to_string(getpid()) + ".yaml")).string();
  std::ofstream(yaml) << "served_model_name: gamma\nmax_model_len: 300\n";
  ServeProcess srv({"--max-model-len", "128", "--max_model_len", "200", "-O3", "--compilation-config", R"({"level":3})",
                    "--served_model_name", "alpha", "beta", "--max_num_seqs=8",
                    "--structured_outputs_config.backend", "xgrammar", "--config", yaml});
  ASSERT_TRUE(srv.wait_healthy(300s)) << "vireo serve refused a repeated flag";
  httplib::Client cli(srv.url());
  auto r = cli.Get("/v1/models");
  ASSERT_TRUE(r && r->status == 200);
  const auto models = nlohmann::json::parse(r->body)["data"];
  ASSERT_EQ(models.size(), 2u);
  EXPECT_EQ(models[0]["id"], "alpha");
  EXPECT_EQ(models[1]["id"], "beta");
  EXPECT_EQ(models[0]["max_model_len"], 200);
  EXPECT_EQ(srv.terminate(60s), 0);
  std::filesystem::remove(yaml);
}

namespace {

// vLLM's --enable-prompt-tokens-details and --return-tokens-as-token-ids on a live server: usage reports
// the prompt tokens the prefix cache served (the second of two identical prompts reuses at least one
// whole 16-token block), logprob tokens come as "token_id:<id>", and a request's own
// return_tokens_as_token_ids: false wins over the flag.
TEST(ServerE2E, PromptTokensDetailsAndTokenIdsFlags) {
  // Also vLLM flags that have no effect here: the server must start with them.
  ServeProcess srv({"--enable-prompt-tokens-details", "--return-tokens-as-token-ids", "--disable-fastapi-docs",
                    "--download-dir", "/tmp", "--disable-custom-all-reduce", "--max-seq-len-to-capture", "8192",
                    "--response-role", "assistant", "--guided-decoding-backend", "xgrammar"});
  ASSERT_TRUE(srv.wait_healthy(300s)) << "vireo serve did not become healthy";
  httplib::Client cli(srv.url());
  cli.set_read_timeout(120, 0);
  auto post = [&](const std::string& path, const nlohmann::json& body) {
    auto r = cli.Post(path, body.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : std::string("no response"));
    return r ? nlohmann::json::parse(r->body, nullptr, false) : nlohmann::json();
  };
  std::string prompt;
  for (int i = 0; i < 6; ++i) prompt += "The quick brown fox jumps over the lazy dog near the river bank. ";
  const nlohmann::json body = {{"prompt", prompt}, {"max_tokens", 2}, {"logprobs", 1}, {"temperature", 0}};
  const nlohmann::json first = post("/v1/completions", body), second = post("/v1/completions", body);
  ASSERT_TRUE(first["usage"]["prompt_tokens_details"].is_object()) << first.dump();
  EXPECT_GE(second["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 16) << second.dump();
  EXPECT_LE(second["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(),
            second["usage"]["prompt_tokens"].get<int>());
  const std::string tok = second["choices"][0]["logprobs"]["tokens"][0].get<std::string>();
  EXPECT_EQ(tok.rfind("token_id:", 0), 0u) << tok;
  nlohmann::json plain = body;
  plain["return_tokens_as_token_ids"] = false;
  const nlohmann::json third = post("/v1/completions", plain);
  EXPECT_NE(third["choices"][0]["logprobs"]["tokens"][0].get<std::string>().rfind("token_id:", 0), 0u);
  const nlohmann::json chat = post("/v1/chat/completions",
                                   {{"messages", {{{"role", "user"}, {"content", prompt}}}},
                                    {"max_tokens", 2},
                                    {"logprobs", true}});
  ASSERT_TRUE(chat["usage"]["prompt_tokens_details"].is_object()) << chat.dump();
  EXPECT_EQ(chat["choices"][0]["logprobs"]["content"][0]["token"].get<std::string>().rfind("token_id:", 0), 0u);
  EXPECT_EQ(srv.terminate(60s), 0);
}

}  // namespace
