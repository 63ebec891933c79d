// `vireo bench serve`: load-test an OpenAI-compatible server (flags as `vllm bench serve`).
#include <cmath>
#include <memory>

#include "bench/serve_bench.h"
#include "cli/command_registry.h"

namespace {

vireo::CommandRunner setup_bench_serve(CLI::App& app) {
  auto a = std::make_shared<vireo::bench::ServeBenchArgs>();
  auto max_conc = std::make_shared<int>(0);
  app.add_option("--backend", a->backend, "openai | openai-chat (vllm = openai)")->capture_default_str();
  app.add_option("--base-url", a->base_url,
                 "Server base URL (http://host:port or https://...), instead of --host/--port");
  app.add_flag("--insecure", a->insecure, "https: do not check the server's certificate");
  app.add_option("--ca-file", a->ca_file,
                 "https: PEM CA certificates for the server's certificate (default: the system's; SSL_CERT_FILE)");
  app.add_option("--host", a->host, "Server host")->capture_default_str();
  app.add_option("--port", a->port, "Server port")->capture_default_str();
  app.add_option("--endpoint", a->endpoint, "API path (default /v1/completions or /v1/chat/completions)");
  app.add_option("--model", a->model, "Model name sent in requests (default: first of GET /v1/models)");
  app.add_option("--served-model-name", a->served_model_name, "Model name in requests, if not --model");
  app.add_option("--lora-modules", a->lora_modules, "LoRA adapter names served; each request names one at random")
      ->expected(1, -1);
  app.add_option("--tokenizer", a->tokenizer, "Folder with tokenizer.json (default: --model's, else models/qwen3)");
  app.add_option("--dataset-name", a->dataset_name, "sonnet | random | sharegpt | custom | prefix_repetition")->capture_default_str();
  app.add_option("--dataset-path", a->dataset_path, "sonnet text (default benchmarks/data/sonnet.txt), ShareGPT JSON or custom JSONL");
  app.add_option("--num-prompts", a->num_prompts, "Number of requests")->capture_default_str();
  app.add_option("--request-rate", a->request_rate, "Requests/s (inf = all at once; else Poisson/gamma arrivals)")
      ->capture_default_str();
  app.add_option("--burstiness", a->burstiness, "Gamma shape of the gaps (1 = Poisson)")->capture_default_str();
  app.add_option("--max-concurrency", *max_conc, "Maximum requests in flight");
  app.add_option("--ramp-up-strategy", a->ramp_up_strategy,
                 "linear | exponential: the rate goes from --ramp-up-start-rps to --ramp-up-end-rps (not --request-rate)")
      ->check(CLI::IsMember({"linear", "exponential"}));
  app.add_option("--ramp-up-start-rps", a->ramp_up_start_rps, "Requests/s at the start of the ramp");
  app.add_option("--ramp-up-end-rps", a->ramp_up_end_rps, "Requests/s at its end");
  app.add_option("--random-input-len", a->random_input_len)->capture_default_str();
  app.add_option("--random-output-len", a->random_output_len)->capture_default_str();
  app.add_option("--random-range-ratio", a->random_range_ratio)->capture_default_str();
  app.add_option("--random-prefix-len", a->random_prefix_len)->capture_default_str();
  app.add_option("--sonnet-input-len", a->sonnet_input_len)->capture_default_str();
  app.add_option("--sonnet-output-len", a->sonnet_output_len)->capture_default_str();
  app.add_option("--sonnet-prefix-len", a->sonnet_prefix_len)->capture_default_str();
  app.add_option("--custom-output-len", a->custom_output_len, "Output tokens for custom lines without output_tokens")
      ->capture_default_str();
  app.add_option("--prefix-repetition-prefix-len", a->prefix_repetition_prefix_len)->capture_default_str();
  app.add_option("--prefix-repetition-suffix-len", a->prefix_repetition_suffix_len)->capture_default_str();
  app.add_option("--prefix-repetition-num-prefixes", a->prefix_repetition_num_prefixes)->capture_default_str();
  app.add_option("--prefix-repetition-output-len", a->prefix_repetition_output_len)->capture_default_str();
  app.add_option("--sharegpt-output-len", a->sharegpt_output_len,
                 "Output tokens of every ShareGPT request (default: its conversation's second turn's length)");
  app.add_flag("--disable-shuffle", a->disable_shuffle, "custom / sharegpt: take the prompts in the file's order");
  app.add_flag("--ignore-eos", a->ignore_eos, "Send ignore_eos so every request generates its output length");
  const std::string sg = "Sampling (vLLM bench serve's; unset: greedy)";
  app.add_option("--temperature", a->temperature, "Sent as temperature (default 0: greedy)")->group(sg);
  app.add_option("--top-p", a->top_p, "Sent as top_p")->group(sg);
  app.add_option("--top-k", a->top_k, "Sent as top_k")->group(sg);
  app.add_option("--min-p", a->min_p, "Sent as min_p")->group(sg);
  app.add_option("--frequency-penalty", a->frequency_penalty, "Sent as frequency_penalty")->group(sg);
  app.add_option("--presence-penalty", a->presence_penalty, "Sent as presence_penalty")->group(sg);
  app.add_option("--repetition-penalty", a->repetition_penalty, "Sent as repetition_penalty")->group(sg);
  app.add_option("--logprobs", a->logprobs, "Sent as logprobs (completions) or top_logprobs (chat)")->group(sg);
  app.add_option("--extra-body", a->extra_body, "JSON object merged into every request body (after the flags above)")
      ->group(sg);
  app.add_option("--header", a->headers,
                 "KEY=VALUE HTTP headers of every request ($OPENAI_API_KEY is sent as a Bearer token, as vLLM's bench)")
      ->expected(1, -1);
  app.add_option("--request-id-prefix", a->request_id_prefix, "Send x-request-id: <prefix><index> with each request");
  app.add_option("--seed", a->seed)->capture_default_str();
  app.add_option("--num-warmups", a->num_warmups, "Warmup requests before the run")->capture_default_str();
  app.add_option("--percentile-metrics", a->percentile_metrics, "Comma list of ttft,tpot,itl,e2el")
      ->capture_default_str();
  app.add_option("--metric-percentiles", a->metric_percentiles, "Comma list of percentiles, e.g. 50,90,99")
      ->capture_default_str();
  app.add_option("--goodput", a->goodput, "SLOs KEY:MS (ttft, tpot, e2el)")->expected(1, 3);
  app.add_flag("--save-result", a->save_result, "Save the result JSON");
  app.add_flag("--save-detailed", a->save_detailed,
               "Keep the per-request arrays (input_lens, output_lens, ttfts, itls, generated_texts, errors, ...)");
  app.add_flag("--append-result", a->append_result, "Append the result (a JSON line) to an existing result file");
  app.add_option("--metadata", a->metadata, "KEY=VALUE pairs saved in the result")->expected(1, -1);
  auto unused_flag = std::make_shared<bool>(false);
  auto tokenizer_mode = std::make_shared<std::string>("auto");
  app.add_flag("--trust-remote-code", *unused_flag, "No effect: tokenizers are read from tokenizer.json");
  app.add_option("--tokenizer-mode", *tokenizer_mode, "auto | hf | slow: one tokenizer (tokenizer.json)")
      ->check(CLI::IsMember({"auto", "hf", "slow"}));
  app.add_option("--result-dir", a->result_dir, "Folder for the result JSON");
  app.add_option("--result-filename", a->result_filename, "Result file name");
  app.add_option("--label", a->label, "Result label (default: --backend)");
  app.add_flag("--disable-tqdm", a->disable_tqdm, "No progress bar");
  app.add_option("--request-timeout", a->request_timeout_s, "Per-request timeout (s)")->capture_default_str();
  app.add_option("--ready-check-timeout-sec", a->ready_check_timeout_s, "Wait this long for the server")
      ->capture_default_str();
  return [a, max_conc, unused_flag, tokenizer_mode, &app]() {
    if (app.count("--max-concurrency")) a->max_concurrency = *max_conc;
    return vireo::bench::run_bench_serve(*a);
  };
}

const bool kRegistered = vireo::register_command("bench serve", "Benchmark an OpenAI-compatible server", setup_bench_serve);

}  // namespace
