#include "bench/serve_bench.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/arrival.h"
#include "bench/sharegpt_dataset.h"
#include "bench/tokenizer_dir.h"
#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace vireo::bench {

namespace fs = std::filesystem;

namespace {

// Collects a small response body (GET /v1/models).
class BodyCollector : public StreamHandler {
 public:
  int status = 0;
  std::string body, error;
  bool finished = false;
  void on_status(int s, double) override { status = s; }
  void on_body(std::string_view d, double) override { body.append(d); }
  void on_complete(double) override { finished = true; }
  void on_error(const std::string& m, double) override {
    error = m;
    finished = true;
  }
};

// GET /v1/models, retried while the server does not accept connections (still starting).
std::string fetch_first_model(const std::string& host, int port, const ClientTls& tls, const std::string& path,
                              double wait_s, const std::vector<std::pair<std::string, std::string>>& headers) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
  BodyCollector c;
  while (true) {
    EpollHttpClient client(host, port, tls);
    c = BodyCollector();
    HttpRequest req;
    req.method = "GET";
    req.path = path;
    req.headers = headers;
    req.timeout_s = 30;
    client.start(req, &c);
    while (!c.finished) client.poll(100);
    if (c.error.rfind("connect failed", 0) != 0 || std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  if (!c.error.empty() || c.status != 200)
    throw Error("cannot list models at " + std::string(tls.enabled ? "https" : "http") + "://" + host + ":" + std::to_string(port) + path + ": " +
                (c.error.empty() ? "HTTP " + std::to_string(c.status) : c.error) + " (is the server running?)");
  auto j = nlohmann::json::parse(c.body, nullptr, false);
  if (j.is_discarded() || !j.contains("data") || !j["data"].is_array() || j["data"].empty() ||
      !j["data"][0].contains("id"))
    throw Error("no models found at " + path);
  return j["data"][0]["id"].get<std::string>();
}

std::string now_string(const char* fmt_str) {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), fmt_str, &tm);
  return buf;
}

// As Python's str(float): "inf", "10.0", "2.5".
std::string format_rate(double rate) {
  if (std::isinf(rate)) return "inf";
  std::string s = fmt::format("{}", rate);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

// vLLM's KEY=VALUE flags (--metadata, --header): both sides trimmed; throws for an item without '='.
std::vector<std::pair<std::string, std::string>> parse_pairs(const std::vector<std::string>& items, const char* flag) {
  auto trim = [](std::string t) {
    t.erase(0, t.find_first_not_of(" \t"));
    t.erase(t.find_last_not_of(" \t") + 1);
    return t;
  };
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& kv : items) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) throw Error(std::string(flag) + " " + kv + ": expected KEY=VALUE");
    out.emplace_back(trim(kv.substr(0, eq)), trim(kv.substr(eq + 1)));
  }
  return out;
}

}  // namespace

std::string request_extra_body(const ServeBenchArgs& args) {
  nlohmann::json j = nlohmann::json::object();
  auto put = [&](const char* key, const auto& v) {
    if (v) j[key] = *v;
  };
  put("temperature", args.temperature);
  put("top_p", args.top_p);
  put("top_k", args.top_k);
  put("min_p", args.min_p);
  put("frequency_penalty", args.frequency_penalty);
  put("presence_penalty", args.presence_penalty);
  put("repetition_penalty", args.repetition_penalty);
  if (args.logprobs) {
    if (*args.logprobs < 0) throw Error("--logprobs must be >= 0");
    if (parse_backend(args.backend) == Backend::kChat) {
      j["logprobs"] = true;
      j["top_logprobs"] = *args.logprobs;
    } else {
      j["logprobs"] = *args.logprobs;
    }
  }
  if (!args.extra_body.empty()) {
    const auto extra = nlohmann::json::parse(args.extra_body, nullptr, /*allow_exceptions=*/false);
    if (!extra.is_object()) throw Error("--extra-body: expected a JSON object, e.g. '{\"top_k\": 20}'");
    j.merge_patch(extra);
  }
  return j.empty() ? std::string() : j.dump();
}

std::vector<std::pair<std::string, std::string>> request_headers(const ServeBenchArgs& args) {
  std::vector<std::pair<std::string, std::string>> out = parse_pairs(args.headers, "--header");
  bool auth = false;
  for (const auto& [k, v] : out) {
    std::string key = k;
    std::transform(key.begin(), key.end(), key.begin(), [](unsigned char c) { return std::tolower(c); });
    auth = auth || key == "authorization";
  }
  const char* key = std::getenv("OPENAI_API_KEY");
  if (!auth && key != nullptr && key[0] != '\0') out.emplace_back("Authorization", std::string("Bearer ") + key);
  return out;
}

int run_bench_serve(const ServeBenchArgs& args) {
  Backend backend = parse_backend(args.backend);
  if (args.num_prompts <= 0) throw Error("--num-prompts must be > 0");
  if (args.max_concurrency && *args.max_concurrency <= 0) throw Error("--max-concurrency must be > 0");
  auto metric_names = parse_metric_names(args.percentile_metrics);
  auto percentiles = parse_percentiles(args.metric_percentiles);
  auto goodput = parse_goodput(args.goodput);
  if (!args.ramp_up_strategy.empty())
    check_ramp_up({args.ramp_up_strategy, args.ramp_up_start_rps, args.ramp_up_end_rps});
  (void)ArrivalProcess(args.request_rate, args.burstiness, 0);  // validates rate and burstiness
  const auto metadata = parse_pairs(args.metadata, "--metadata");  // checked before the run, saved with its result

  Endpoint ep = args.base_url.empty() ? Endpoint{args.host, args.port, ""} : parse_base_url(args.base_url);
  ClientTls tls;
  tls.enabled = ep.tls;
  tls.verify = !args.insecure;
  tls.ca_file = args.ca_file;
  std::string endpoint = args.endpoint;
  if (endpoint.empty()) endpoint = backend == Backend::kChat ? "/v1/chat/completions" : "/v1/completions";
  if ((backend == Backend::kChat) != (endpoint.find("chat") != std::string::npos))
    std::fprintf(stderr, "warning: --endpoint %s with --backend %s\n", endpoint.c_str(), args.backend.c_str());

  std::string model_id = args.model;
  const auto headers = request_headers(args);
  if (model_id.empty())
    model_id = fetch_first_model(ep.host, ep.port, tls, ep.path_prefix + "/v1/models", args.ready_check_timeout_s,
                                 headers);
  std::string model_name = args.served_model_name.empty() ? model_id : args.served_model_name;

  std::string tok_dir = resolve_tokenizer_dir(args.tokenizer, args.model);
  std::unique_ptr<Tokenizer> tok = Tokenizer::from_dir(tok_dir);

  std::vector<SampleRequest> requests;
  if (args.dataset_name == "random") {
    RandomDatasetOptions o;
    o.num_requests = args.num_prompts;
    o.input_len = args.random_input_len;
    o.output_len = args.random_output_len;
    o.range_ratio = args.random_range_ratio;
    o.prefix_len = args.random_prefix_len;
    o.seed = args.seed;
    requests = build_random_dataset(*tok, o);
  } else if (args.dataset_name == "sonnet") {
    SonnetDatasetOptions o;
    o.num_requests = args.num_prompts;
    o.input_len = args.sonnet_input_len;
    o.output_len = args.sonnet_output_len;
    o.prefix_len = args.sonnet_prefix_len;
    o.seed = args.seed;
    o.return_prompt_formatted = backend != Backend::kChat;
    std::string path = args.dataset_path.empty() ? default_sonnet_path() : args.dataset_path;
    requests = build_sonnet_dataset(*tok, read_lines_keep_newline(path), o);
  } else if (args.dataset_name == "custom") {
    if (args.dataset_path.empty()) throw Error("--dataset-name custom needs --dataset-path (JSONL)");
    CustomDatasetOptions o;
    o.num_requests = args.num_prompts;
    o.output_len = args.custom_output_len;
    o.count_chat_formatted = backend == Backend::kChat;
    o.shuffle = !args.disable_shuffle;
    o.seed = args.seed;
    requests = load_custom_dataset(*tok, args.dataset_path, o);
  } else if (args.dataset_name == "prefix_repetition") {
    PrefixRepetitionOptions o;
    o.num_requests = args.num_prompts;
    o.prefix_len = args.prefix_repetition_prefix_len;
    o.suffix_len = args.prefix_repetition_suffix_len;
    o.num_prefixes = args.prefix_repetition_num_prefixes;
    o.output_len = args.prefix_repetition_output_len;
    o.seed = args.seed;
    requests = build_prefix_repetition_dataset(*tok, o);
  } else if (args.dataset_name == "sharegpt") {
    if (args.dataset_path.empty()) throw Error("--dataset-name sharegpt needs --dataset-path (the ShareGPT JSON)");
    ShareGptDatasetOptions o;
    o.num_requests = args.num_prompts;
    o.output_len = args.sharegpt_output_len;
    o.seed = args.seed;
    o.shuffle = !args.disable_shuffle;
    requests = load_sharegpt_dataset(*tok, args.dataset_path, o);
  } else {
    throw Error("--dataset-name must be sonnet, random, sharegpt, custom or prefix_repetition, got '" +
                args.dataset_name + "'");
  }

  LoadOptions lo;
  lo.backend = backend;
  lo.host = ep.host;
  lo.port = ep.port;
  lo.tls = tls;
  lo.path = ep.path_prefix + endpoint;
  lo.model = model_name;
  lo.lora_modules = args.lora_modules;
  lo.ignore_eos = args.ignore_eos;
  lo.extra_body = request_extra_body(args);
  lo.headers = headers;
  lo.request_id_prefix = args.request_id_prefix;
  lo.request_timeout_s = args.request_timeout_s;

  // Ready check: the first prompt alone, retried while the server is not accepting connections.
  std::printf("Starting initial single prompt test run...\n");
  std::fflush(stdout);
  {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(args.ready_check_timeout_s);
    LoadOptions ro = lo;
    ro.request_timeout_s = std::min(lo.request_timeout_s, args.ready_check_timeout_s);
    while (true) {
      auto r = run_load({requests[0]}, ro, nullptr);
      if (r[0].success) break;
      bool connecting = r[0].error.rfind("connect failed", 0) == 0 || r[0].error.rfind("connection closed", 0) == 0 ||
                        r[0].error.rfind("recv failed", 0) == 0;
      if (!connecting || std::chrono::steady_clock::now() > deadline)
        throw Error("initial test run failed - make sure the benchmark arguments are right. Error: " + r[0].error);
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  }
  std::printf("Initial test run completed.\n");
  if (args.num_warmups > 0) {
    std::printf("Warming up with %d requests...\n", args.num_warmups);
    LoadOptions wo = lo;
    wo.max_concurrency = args.max_concurrency;
    run_load(std::vector<SampleRequest>(args.num_warmups, requests[0]), wo, nullptr);
    std::printf("Warmup run completed.\n");
  }
  std::printf("Starting main benchmark run...\n");
  const RampUp ramp{args.ramp_up_strategy, args.ramp_up_start_rps, args.ramp_up_end_rps};
  if (ramp.strategy.empty()) {
    std::printf("Traffic request rate: %s\n", format_rate(args.request_rate).c_str());
  } else {
    std::printf("Traffic ramp-up strategy: %s.\nWill increase RPS from %s to %s RPS over the duration of the benchmark.\n",
                ramp.strategy.c_str(), fmt::format("{}", ramp.start_rps).c_str(), fmt::format("{}", ramp.end_rps).c_str());
  }
  std::printf("Burstiness factor: %s (%s)\n", fmt::format("{}", args.burstiness).c_str(),
              args.burstiness == 1.0 ? "Poisson process" : "Gamma distribution");
  std::printf("Maximum request concurrency: %s\n",
              args.max_concurrency ? std::to_string(*args.max_concurrency).c_str() : "None");
  std::fflush(stdout);

  lo.request_rate = args.request_rate;
  lo.burstiness = args.burstiness;
  lo.ramp_up = ramp;
  lo.max_concurrency = args.max_concurrency;
  lo.seed = args.seed;
  lo.progress = !args.disable_tqdm && isatty(STDERR_FILENO);
  double duration = 0;
  std::vector<RequestResult> results = run_load(requests, lo, &duration);

  auto count = [&](const std::string& text) { return static_cast<int>(tok->encode(text, false).size()); };
  ServeMetrics m = compute_serve_metrics(results, duration, percentiles, goodput, count);
  if (m.failed > 0) {
    std::printf("Failed requests during benchmark run detected (capping to 10):\n");
    int shown = 0;
    for (const auto& r : results) {
      if (r.success) continue;
      std::printf("Error %d: %s\n", shown, r.error.c_str());
      if (++shown == 10) break;
    }
  }
  ReportInfo info;
  info.duration_s = duration;
  info.request_rate = args.request_rate;
  info.max_concurrency = args.max_concurrency;
  info.has_goodput = !goodput.empty();
  info.selected_metrics = metric_names;
  std::fputs(format_report(m, info).c_str(), stdout);
  std::fflush(stdout);

  if (args.save_result) {
    nlohmann::json j;
    j["date"] = now_string("%Y%m%d-%H%M%S");
    j["endpoint_type"] = args.backend;
    j["backend"] = args.backend;
    j["label"] = args.label.empty() ? nlohmann::json(nullptr) : nlohmann::json(args.label);
    j["model_id"] = model_id;
    j["tokenizer_id"] = tok_dir;
    j["num_prompts"] = args.num_prompts;
    j["request_rate"] = std::isinf(args.request_rate) ? nlohmann::json("inf") : nlohmann::json(args.request_rate);
    j["burstiness"] = args.burstiness;
    if (!ramp.strategy.empty()) {
      j["ramp_up_strategy"] = ramp.strategy;
      j["ramp_up_start_rps"] = ramp.start_rps;
      j["ramp_up_end_rps"] = ramp.end_rps;
    }
    j["max_concurrency"] = args.max_concurrency ? nlohmann::json(*args.max_concurrency) : nlohmann::json(nullptr);
    j["dataset_name"] = args.dataset_name;
    j.update(result_json(m, info, results));
    if (!args.save_detailed)  // vLLM drops the per-request arrays unless --save-detailed
      for (const char* k : {"input_lens", "output_lens", "ttfts", "itls", "generated_texts", "errors", "latencies",
                            "start_times"})
        j.erase(k);
    for (const auto& [k, v] : metadata) j[k] = v;
    std::string base_model = model_id.substr(model_id.find_last_of('/') == std::string::npos ? 0 : model_id.find_last_of('/') + 1);
    std::string label = args.label.empty() ? args.backend : args.label;
    std::string conc = args.max_concurrency ? "-concurrency" + std::to_string(*args.max_concurrency) : "";
    std::string file = args.result_filename.empty()
                           ? label + "-" + format_rate(args.request_rate) + "qps" + conc + "-" + base_model + "-" +
                                 now_string("%Y%m%d-%H%M%S") + ".json"
                           : args.result_filename;
    if (!args.result_dir.empty()) {
      fs::create_directories(args.result_dir);
      file = (fs::path(args.result_dir) / file).string();
    }
    const bool append = args.append_result && fs::exists(file) && fs::file_size(file) > 0;
    std::ofstream f(file, append ? std::ios::app : std::ios::trunc);
    if (!f) throw Error("cannot write result file '" + file + "'");
    f << j.dump() << "\n";
    std::printf("Saved result to %s\n", file.c_str());
  }
  return m.completed > 0 ? 0 : 1;
}

}  // namespace vireo::bench
