// `vireo serve [MODEL]`: the OpenAI-compatible server (vLLM's `vllm serve` flags). The listener
// comes up first (/health answers 503 while the model loads on a thread), then
// "Started server on http://host:port" is logged once requests can be served.
// SIGTERM/SIGINT: refuse new requests, drain in-flight ones up to --shutdown-timeout seconds
// (default 30; 0 aborts at once), abort the rest, exit 0.
#include <signal.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cctype>
#include <cstdlib>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/human_int.h"
#include "cli/command_registry.h"
#include "cli/lora_flags.h"
#include "cli/vllm_compat_flags.h"
#include "engine/compilation_config.h"
#include "core/error.h"
#include "core/log.h"
#include "cli/bench_engine_flags.h"
#include "engine/async_engine.h"
#include "server/api_server.h"
#include "server/reasoning_parser.h"
#include "server/tool_parser.h"

namespace vireo {
namespace {

// SIGTERM/SIGINT -> a byte on this pipe. A handler rather than sigwait: OpenBLAS starts its
// threads when the library loads, before any code here could block the signals for them.
int g_signal_pipe[2] = {-1, -1};

void on_signal(int signo) {
  char c = static_cast<char>(signo);
  ssize_t ignored = write(g_signal_pipe[1], &c, 1);
  (void)ignored;
}

int wait_for_signal() {
  char c = 0;
  for (;;) {
    ssize_t n = read(g_signal_pipe[0], &c, 1);
    if (n == 1) return c;
    if (n < 0 && errno == EINTR) continue;
    return 0;
  }
}

struct ServeArgs {
  std::string model_positional;
  std::string config_file;  // expanded by main.cc before parsing; never set here
  EngineConfig engine;
  server::ServerOptions server;
  std::vector<std::string> api_keys;  // vLLM's nargs="+": any one is accepted
  std::string kv_cache_memory;
  std::vector<std::string> served_model_names;  // vLLM's nargs="+": the first is the main name
  VllmCompatFlags compat;
  LoraFlags lora;
  std::string convert = "auto", task = "auto";  // vLLM's --convert / legacy --task: embed means --runner pooling
  std::string default_chat_template_kwargs;     // JSON object text (vLLM's --default-chat-template-kwargs)
};

// "1000000", "512MiB", "2GiB", "64M", "1G" -> bytes.
size_t parse_bytes(const std::string& s) {
  size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  if (i == 0) throw Error("--kv-cache-memory-bytes: '" + s + "' is not a size");
  double v = std::stod(s.substr(0, i));
  std::string unit = s.substr(i);
  std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char c) { return std::tolower(c); });
  double mult = 1;
  if (unit == "" || unit == "b") mult = 1;
  else if (unit == "k" || unit == "kib" || unit == "kb") mult = 1024.0;
  else if (unit == "m" || unit == "mib" || unit == "mb") mult = 1024.0 * 1024;
  else if (unit == "g" || unit == "gib" || unit == "gb") mult = 1024.0 * 1024 * 1024;
  else throw Error("--kv-cache-memory-bytes: unknown unit in '" + s + "'");
  return static_cast<size_t>(v * mult);
}

// vLLM takes JSON lists (--allowed-origins '["http://a", "http://b"]'); plain values work too.
std::vector<std::string> parse_string_list(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (const auto& v : args) {
    if (!v.empty() && v.front() == '[') {
      nlohmann::json j = nlohmann::json::parse(v, nullptr, false);
      if (!j.is_array()) throw Error("'" + v + "' is not a JSON list of strings");
      for (const auto& e : j) {
        if (!e.is_string()) throw Error("'" + v + "' is not a JSON list of strings");
        out.push_back(e.get<std::string>());
      }
    } else {
      // CLI11 itself splits a bracketed value ('["http://a", "http://b"]') into its comma-separated items,
      // each still in its JSON quotes: those items are JSON strings.
      std::string item = v;
      item.erase(0, item.find_first_not_of(" \t"));
      item.erase(item.find_last_not_of(" \t") + 1);
      if (item.size() >= 2 && item.front() == '"' && item.back() == '"') {
        const auto j = nlohmann::json::parse(item, nullptr, false);
        if (!j.is_string()) throw Error("'" + v + "' is not a JSON string");
        item = j.get<std::string>();
      }
      out.push_back(item);
    }
  }
  return out;
}

int run_serve(ServeArgs& a) {
  check_vllm_compat_flags(a.compat);
  apply_compilation_config(a.compat.compilation_config, a.engine);
  if (const std::string& o = a.compat.optimization_level; !o.empty()) {
    if (o.size() != 1 || o[0] < '0' || o[0] > '3') throw Error("--optimization-level " + o + ": expected 0, 1, 2 or 3");
    apply_compilation_config(o, a.engine);
  }
  if (const int m = a.compat.max_cudagraph_capture_size; m >= 0)
    apply_compilation_config("{\"max_cudagraph_capture_size\": " + std::to_string(m) + "}", a.engine);
  apply_lora_flags(a.lora, a.engine);
  if (a.convert == "embed" || a.task == "embed" || a.task == "embedding") a.engine.runner = "pooling";
  if (a.convert != "auto" && a.convert != "none" && a.convert != "embed")
    throw Error("--convert " + a.convert + ": only auto, none and embed are supported");
  if (a.task != "auto" && a.task != "generate" && a.task != "embed" && a.task != "embedding")
    throw Error("--task " + a.task + ": only auto, generate and embed are supported");
  a.engine.quantization = a.compat.quantization;
  a.engine.kv_cache_dtype = a.compat.kv_cache_dtype;
  // The samplers return at most 20 top logprobs a token (SampleParams::num_top_logprobs).
  if (const int m = a.server.limits.max_logprobs; m < 0 || m > 20)
    throw Error("--max-logprobs " + std::to_string(m) + ": must be in [0, 20] (the samplers return at most 20 top " +
                "logprobs a token; vLLM's -1, the whole vocabulary, is not supported)");
  for (auto* list : {&a.server.cors.allowed_origins, &a.server.cors.allowed_methods, &a.server.cors.allowed_headers})
    *list = parse_string_list(*list);
  if (!a.model_positional.empty()) {
    if (!a.engine.model.empty() && a.engine.model != a.model_positional)
      throw Error("serve: the positional MODEL and --model disagree");
    a.engine.model = a.model_positional;
  }
  if (!a.kv_cache_memory.empty()) a.engine.kv_cache_memory_bytes = parse_bytes(a.kv_cache_memory);
  if (!a.default_chat_template_kwargs.empty()) {
    auto j = nlohmann::ordered_json::parse(a.default_chat_template_kwargs, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object())
      throw Error("--default-chat-template-kwargs: expected a JSON object, e.g. '{\"enable_thinking\": false}'");
    a.server.limits.default_chat_template_kwargs = std::move(j);
  }
  std::string key = a.api_keys.empty() ? "" : a.api_keys.front();
  if (a.api_keys.size() > 1) a.server.more_api_keys.assign(a.api_keys.begin() + 1, a.api_keys.end());
  if (key.empty())
    if (const char* k = std::getenv("VLLM_API_KEY"); k && *k) key = k;
  if (key.empty())
    if (const char* k = std::getenv("VIREO_API_KEY"); k && *k) key = k;
  if (!key.empty()) a.server.api_key = key;
  if (!a.served_model_names.empty()) {
    a.server.served_model_name = a.served_model_names.front();
    a.server.served_model_aliases.assign(a.served_model_names.begin() + 1, a.served_model_names.end());
  }
  if (a.server.served_model_name.empty()) a.server.served_model_name = a.engine.served_model_name;
  if (a.server.served_model_name.empty()) a.server.served_model_name = a.engine.model.empty() ? "default" : a.engine.model;
  a.engine.served_model_name = a.server.served_model_name;
  // A stream holds a pool thread for its whole life: room for every running and waiting sequence (the
  // server starts before the engine resolves an auto max_num_seqs: its largest value then).
  const int max_seqs = a.engine.max_num_seqs > 0 ? a.engine.max_num_seqs : 1024;
  a.server.num_threads = std::max(64, 2 * max_seqs + 16);
  if (a.server.shutdown_timeout_s < 0) throw Error("--shutdown-timeout must be >= 0");
  if (const char* v = std::getenv("VLLM_ALLOW_RUNTIME_LORA_UPDATING"))
    a.server.allow_runtime_lora_updating = std::string(v) == "1" || std::string(v) == "true" || std::string(v) == "True";
  if (a.server.enable_auto_tool_choice && a.server.tool_call_parser.empty())
    throw Error("--enable-auto-tool-choice requires --tool-call-parser");  // as vLLM

  if (pipe(g_signal_pipe) != 0) throw Error("serve: pipe() failed");
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);

  server::ApiServer srv(a.server);
  int port = srv.bind();
  std::thread listener([&] { srv.run(); });
  const std::string where = a.server.uds.empty() ? a.server.host + ":" + std::to_string(port) : "unix:" + a.server.uds;
  log_info("Listening on {}; loading the model (/health answers 503 until it is ready)", where);

  std::shared_ptr<AsyncEngine> engine;
  std::atomic<bool> load_done{false};
  std::thread loader([&] {
    try {
      engine = AsyncEngine::create(a.engine);
      srv.set_engine(engine);
      log_info("Started server on {}://{}", a.server.tls.enabled() ? "https" : "http", where);
    } catch (const std::exception& e) {
      log_error("Model loading failed: {}", e.what());
      srv.set_load_error(e.what());
      on_signal(SIGTERM);  // nothing to serve: shut down
    }
    load_done = true;
  });

  int sig = wait_for_signal();
  log_info("Received {}, shutting down", sig == SIGINT ? "SIGINT" : "SIGTERM");
  loader.join();  // a load in progress is finished first (it cannot be interrupted)
  srv.shutdown();
  listener.join();
  if (engine) engine->shutdown(std::chrono::milliseconds(0));
  bool failed = srv.context().load_error().has_value();
  log_info("Server stopped");
  return failed ? 1 : 0;
}

CommandRunner setup_serve(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  EngineConfig& c = a->engine;
  server::ServerOptions& s = a->server;
  app.add_option("model_tag", a->model_positional, "Model folder (same as --model)");
  // Read before parsing (main.cc, server/flag_file.h); listed here for --help.
  app.add_option("--config", a->config_file,
                 "YAML file of flags as vLLM's: one 'flag-name: value' a line, lists as [a, b]; the command line wins");
  app.add_option("--model", c.model, "HF model folder or .gguf file (\"\" = the built-in default model)");
  app.add_option("--tokenizer", c.tokenizer, "Tokenizer folder or .gguf file (default: the model's)");
  app.add_option("--load-format", c.load_format, "auto | safetensors | gguf | dummy")->capture_default_str();
  app.add_option("--dtype", c.dtype, "auto | float32 | bfloat16 | float16")->capture_default_str();
  app.add_option("--device", c.device, "auto | cpu | cuda")->capture_default_str();
  app.add_option("--host", s.host, "Address to listen on")->capture_default_str();
  app.add_option("--port", s.port, "Port to listen on (0 = any free port)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  app.add_option("--uds", s.uds, "Listen on this Unix domain socket path instead (--host and --port are then ignored)");
  app.add_option("--ssl-certfile", s.tls.certfile, "Serve HTTPS with this PEM certificate (chain)");
  app.add_option("--ssl-keyfile", s.tls.keyfile, "Its PEM private key (default: in --ssl-certfile)");
  app.add_option("--ssl-ca-certs", s.tls.ca_certs, "PEM CA certificates for client certificates");
  app.add_option("--ssl-cert-reqs", s.tls.cert_reqs,
                 "Client certificates: 0 not asked for, 1 checked when sent, 2 required (Python's ssl.CERT_*)")
      ->capture_default_str();
  app.add_option("--ssl-ciphers", s.tls.ciphers, "OpenSSL cipher list for TLS 1.2");
  app.add_option("--max-model-len", c.max_model_len,
                 "Context length (default: from the model config; 32k = 32,000, 32K = 32,768; auto or -1: that, or the "
                 "longest the KV cache holds, as vLLM)")
      ->transform(human_int_transform());
  app.add_option("--max-num-seqs", c.max_num_seqs,
                 "Most sequences per step (default 0 = auto: 1024 on a GPU with >= 70 GiB, else 256, as vLLM serve; "
                 "at most 256 for models with recurrent state)");
  app.add_option("--max-num-batched-tokens", c.max_num_batched_tokens,
                 "Token budget per step (default 0 = auto: 8192 on a GPU with >= 70 GiB, else 2048, as vLLM serve)");
  app.add_option("--block-size", c.block_size)->capture_default_str();
  app.add_option("--seed", c.seed)->capture_default_str();
  app.add_option("--served-model-name", a->served_model_names,
                 "Model name(s) in the API; responses carry the first (default: the model path)")
      ->expected(1, -1);
  app.add_option("--api-key", a->api_keys,
                 "Require 'Authorization: Bearer <key>' with one of these keys on /v1 routes (also VLLM_API_KEY / VIREO_API_KEY)")
      ->expected(1, -1);
  app.add_option("--generation-config", c.generation_config, "auto | vllm | a folder")->capture_default_str();
  app.add_option("--hf-overrides", c.hf_overrides, "JSON object merged into the model's config.json (vLLM's flag)");
  app.add_option("--kv-cache-memory-bytes", a->kv_cache_memory, "KV cache size (bytes, or with K/M/G/KiB/MiB/GiB)");
  app.add_option("--gpu-memory-utilization", c.gpu_memory_utilization)->capture_default_str();
  app.add_flag("--enable-prefix-caching,!--no-enable-prefix-caching", c.enable_prefix_caching)->capture_default_str();
  app.add_option("--scheduling-policy", c.scheduling_policy,
                 "fcfs: first come, first served; priority: by the request's priority (lower first), then "
                 "arrival, preempting the least important running request when KV memory runs out")
      ->check(CLI::IsMember({"fcfs", "priority"}))
      ->capture_default_str();
  app.add_flag("--enforce-eager", c.enforce_eager, "No CUDA graphs");
  add_cuda_graph_sizes_flag(app, c);
  add_override_generation_config_flag(app, c);
  add_async_scheduling_flags(app, c.async_scheduling);
  add_speculative_flag(app, c.speculative_config);
  add_lora_flags(app, c, a->lora);
  app.add_option("--runner", c.runner, "generate | pooling (serves /v1/embeddings, /classify, /score, /rerank) | auto (pooling for base-model and "
                 "*ForSequenceClassification architectures and GGUFs with a pooling_type, else generate)")
      ->check(CLI::IsMember({"auto", "generate", "pooling"}))
      ->capture_default_str();
  app.add_option("--convert", a->convert, "embed: run a causal LM as an embedding model (= --runner pooling)");
  app.add_option("--task", a->task, "Legacy vLLM flag: embed = --runner pooling");
  app.add_option("--pooler-config", c.pooler_config,
                 "Pooling: '{\"pooling_type\": \"LAST\" | \"MEAN\" | \"CLS\", \"normalize\": true}' (default: the "
                 "model's sentence-transformers config, else LAST, normalised)");
  app.add_flag("--batch-invariant", c.batch_invariant,
               "Batch-invariant kernels: a request's output does not depend on what it is batched with "
               "(also VIREO_BATCH_INVARIANT=1; CUDA only, slower)");
  app.add_option("--shutdown-timeout", s.shutdown_timeout_s,
                 "Seconds to let in-flight requests finish on SIGTERM/SIGINT before aborting them")
      ->capture_default_str();
  app.add_option("--max-request-body-bytes", s.max_body_bytes, "Larger request bodies get 413")->capture_default_str();
  app.add_option("--responses-store-bytes", s.responses_store_bytes,
                 "Memory for finished /v1/responses kept for previous_response_id (0 = none)")
      ->capture_default_str();
  app.add_option("--reasoning-parser", s.reasoning_parser,
                 "Split <think>...</think> into message.reasoning_content (chat)")
      ->check(CLI::IsMember(server::reasoning_parser_names()));
  app.add_flag("--enable-auto-tool-choice", s.enable_auto_tool_choice,
               "Parse tool calls from chat output when tool_choice is \"auto\" (needs --tool-call-parser)");
  app.add_option("--tool-call-parser", s.tool_call_parser, "How the model writes tool calls")
      ->check(CLI::IsMember(server::tool_parser_names()));
  app.add_option("--allowed-origins", s.cors.allowed_origins, "CORS origins (JSON list or values; default [\"*\"])");
  app.add_option("--allowed-methods", s.cors.allowed_methods, "CORS methods (default [\"*\"])");
  app.add_option("--allowed-headers", s.cors.allowed_headers, "CORS headers (default [\"*\"])");
  app.add_flag("--allow-credentials,--allowed-credentials", s.cors.allow_credentials,
               "CORS: allow credentials (vLLM's name; --allowed-credentials is the older spelling)");
  app.add_option("--max-logprobs", s.limits.max_logprobs,
                 "Most logprobs / top_logprobs / prompt_logprobs a request may ask for (0 to 20; vLLM's -1, the "
                 "whole vocabulary, is not offered)")
      ->capture_default_str();
  app.add_flag("--enable-prompt-tokens-details", s.enable_prompt_tokens_details,
               "usage.prompt_tokens_details = {\"cached_tokens\": N}: prompt tokens served from the prefix cache");
  app.add_flag("--enable-tokenizer-info-endpoint", s.enable_tokenizer_info_endpoint,
               "Serve GET /tokenizer_info: the tokenizer's config, class and chat template (vLLM's)");
  app.add_flag("--enable-request-id-headers", s.enable_request_id_headers,
               "Every response carries an X-Request-Id header: the request's own, else a new id");
  app.add_flag("--enable-force-include-usage", s.enable_force_include_usage,
               "Every streamed response ends with a usage chunk, as if stream_options.include_usage were true");
  app.add_flag("--return-tokens-as-token-ids", s.return_tokens_as_token_ids,
               "Logprob tokens as \"token_id:<id>\" unless a request sets return_tokens_as_token_ids");
  app.add_option("--chat-template", c.chat_template,
                 "Jinja chat template: a file (.jinja, or a tokenizer_config.json) or the template text "
                 "(default: the tokenizer's)");
  app.add_option("--num-gpu-blocks-override", c.num_gpu_blocks_override,
                 "Exactly this many KV-cache blocks of --block-size tokens, whatever memory says (vLLM's; e.g. to test "
                 "preemption)");
  app.add_option("--default-chat-template-kwargs", a->default_chat_template_kwargs,
                 "JSON object of chat template variables every chat request gets unless it sets them in its own "
                 "chat_template_kwargs, e.g. '{\"enable_thinking\": false}'");
  app.add_flag("--exclude-tools-when-tool-choice-none", s.limits.exclude_tools_when_tool_choice_none,
               "With tool_choice \"none\" the chat template gets no tools (default: it still lists them)");
  app.add_flag("--trust-request-chat-template", s.limits.trust_request_chat_template,
               "Accept a request's own chat_template (compiled for that request; default: such requests get 400)");
  add_vllm_compat_flags(app, a->compat);
  return [a] { return run_serve(*a); };
}

const bool kRegistered = register_command("serve", "Serve the OpenAI-compatible HTTP API", setup_serve);

}  // namespace
}  // namespace vireo
