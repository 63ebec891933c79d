#include "bench/offline_bench.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>

#include "bench/stats.h"
#include "core/error.h"
#include "engine/llm.h"
#include "engine/speculative_config.h"
#include "tokenizer/tokenizer.h"

namespace vireo::bench {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// vLLM's dummy prompts: random ids below min(10000, vocab); a fresh set per call, so the prefix
// cache never turns a prefill into a cache hit.
std::vector<std::vector<int32_t>> random_prompts(int n, int len, int vocab, std::mt19937_64& rng) {
  std::uniform_int_distribution<int32_t> dist(0, std::max(1, std::min(10000, vocab)) - 1);
  std::vector<std::vector<int32_t>> out(n, std::vector<int32_t>(len));
  for (auto& p : out)
    for (auto& id : p) id = dist(rng);
  return out;
}

LatencyIteration run_latency_iteration(AsyncEngine& engine, const std::vector<std::vector<int32_t>>& prompts,
                                       const SamplingParams& params, uint64_t iter_id) {
  const size_t n = prompts.size();
  std::vector<std::shared_ptr<RequestStream>> streams;
  auto t0 = Clock::now();
  for (size_t i = 0; i < n; ++i)
    streams.push_back(engine.add_request("bench-" + std::to_string(iter_id) + "-" + std::to_string(i), prompts[i], params));
  std::vector<bool> first(n, false), done(n, false);
  size_t num_first = 0, num_done = 0;
  double prefill = 0;
  // Request i's next delta, waiting up to `wait`; false when none came.
  auto take = [&](size_t i, std::chrono::milliseconds wait) {
    auto d = streams[i]->next(wait);
    if (!d) return false;
    if (!d->token_ids.empty() && !first[i]) {
      first[i] = true;
      if (++num_first == n) prefill = seconds_since(t0);
    }
    if (d->finished) {
      if (d->finish_reason == "error") throw Error("bench latency: request failed: " + d->error);
      done[i] = true;
      ++num_done;
    }
    return true;
  };
  while (num_done < n) {
    // Block briefly on one unfinished stream, then drain all: every stream of the batch gets
    // its delta in the same step, so timestamps are off by at most the 1 ms wait.
    for (size_t i = 0; i < n; ++i) {
      if (done[i]) continue;
      take(i, std::chrono::milliseconds(1));
      break;
    }
    for (size_t i = 0; i < n; ++i)
      while (!done[i] && take(i, std::chrono::milliseconds(0))) {
      }
  }
  LatencyIteration it;
  it.latency = seconds_since(t0);
  it.prefill = prefill;
  it.decode = it.latency - prefill;
  it.decode_steps = params.max_tokens - 1;
  return it;
}

void write_json(const std::string& path, const nlohmann::json& j) {
  std::ofstream f(path);
  if (!f) throw Error("cannot write --output-json '" + path + "'");
  f << j.dump(4) << "\n";
}

}  // namespace

nlohmann::json latency_summary_json(const std::vector<LatencyIteration>& iters, int batch_size, int input_len,
                                    int output_len) {
  std::vector<double> lat, pre, step, tps, out_tps;
  for (const auto& it : iters) {
    lat.push_back(it.latency);
    pre.push_back(it.prefill);
    if (it.latency > 0) out_tps.push_back(static_cast<double>(batch_size) * output_len / it.latency);
    if (it.decode_steps > 0 && it.decode > 0) {
      step.push_back(it.decode / it.decode_steps);
      tps.push_back(batch_size * it.decode_steps / it.decode);
    }
  }
  nlohmann::json j;
  j["batch_size"] = batch_size;
  j["input_len"] = input_len;
  j["output_len"] = output_len;
  j["avg_latency"] = mean(lat);  // vLLM's fields: seconds
  j["latencies"] = lat;
  nlohmann::json pct;
  for (int p : {10, 25, 50, 75, 90, 99}) pct[std::to_string(p)] = percentile(lat, p);
  j["percentiles"] = pct;
  auto add = [&](const std::string& name, const std::vector<double>& xs, double scale) {
    std::vector<double> v;
    for (double x : xs) v.push_back(x * scale);
    j["mean_" + name] = mean(v);
    j["median_" + name] = median(v);
    j["p90_" + name] = percentile(v, 90);
    j["p99_" + name] = percentile(v, 99);
    j[name + "_list"] = v;
  };
  add("prefill_time_ms", pre, 1000.0);
  add("decode_step_ms", step, 1000.0);
  add("decode_tokens_per_s", tps, 1.0);
  add("output_tokens_per_s", out_tps, 1.0);  // end to end: every output token over the whole latency
  return j;
}

int run_bench_latency(const LatencyArgs& a) {
  if (a.batch_size <= 0 || a.input_len <= 0 || a.output_len <= 0 || a.num_iters <= 0)
    throw Error("--batch-size, --input-len, --output-len and --num-iters must be > 0");
  EngineConfig cfg = a.engine;
  if (cfg.max_num_seqs > 0) cfg.max_num_seqs = std::max(cfg.max_num_seqs, a.batch_size);  // 0: auto (>= 256)
  LLM llm(AsyncEngine::create(cfg));
  AsyncEngine& engine = llm.engine();
  if (a.input_len + a.output_len > engine.max_model_len())
    throw Error("--input-len + --output-len exceeds max_model_len (" + std::to_string(engine.max_model_len()) + ")");
  SamplingParams params;
  params.n = 1;
  params.temperature = 1.0f;
  params.top_p = 1.0f;
  params.ignore_eos = true;
  params.max_tokens = a.output_len;
  params.detokenize = false;
  std::mt19937_64 rng(cfg.seed);
  int vocab = engine.tokenizer().vocab_size();
  std::printf("bench latency: batch %d, input %d, output %d\n", a.batch_size, a.input_len, a.output_len);
  uint64_t id = 0;
  for (int i = 0; i < a.num_iters_warmup; ++i)
    run_latency_iteration(engine, random_prompts(a.batch_size, a.input_len, vocab, rng), params, id++);
  std::vector<LatencyIteration> iters;
  for (int i = 0; i < a.num_iters; ++i) {
    iters.push_back(run_latency_iteration(engine, random_prompts(a.batch_size, a.input_len, vocab, rng), params, id++));
    std::fprintf(stderr, "\riteration %d/%d: %.4f s", i + 1, a.num_iters, iters.back().latency);
  }
  std::fprintf(stderr, "\n");
  nlohmann::json j = latency_summary_json(iters, a.batch_size, a.input_len, a.output_len);
  j["backend"] = "vireo";
  j["model"] = cfg.model.empty() ? "(built-in default)" : cfg.model;
  j["device"] = cfg.device;
  j["dtype"] = cfg.dtype;
  std::printf("Avg latency: %.6f seconds\n", j["avg_latency"].get<double>());
  for (int p : {10, 25, 50, 75, 90, 99})
    std::printf("%d%% percentile latency: %.6f seconds\n", p, j["percentiles"][std::to_string(p)].get<double>());
  std::printf("Prefill time (ms): mean %.3f, median %.3f, p99 %.3f\n", j["mean_prefill_time_ms"].get<double>(),
              j["median_prefill_time_ms"].get<double>(), j["p99_prefill_time_ms"].get<double>());
  std::printf("Decode time per step (ms): mean %.3f, median %.3f, p99 %.3f\n", j["mean_decode_step_ms"].get<double>(),
              j["median_decode_step_ms"].get<double>(), j["p99_decode_step_ms"].get<double>());
  std::printf("Decode throughput (tok/s): mean %.2f, median %.2f\n", j["mean_decode_tokens_per_s"].get<double>(),
              j["median_decode_tokens_per_s"].get<double>());
  std::printf("Output throughput, end to end (tok/s): mean %.2f, median %.2f\n",
              j["mean_output_tokens_per_s"].get<double>(), j["median_output_tokens_per_s"].get<double>());
  // With chunked prefill over several steps the first requests decode beside later prompts' chunks, so
  // the "decode" phase (after the last first token) runs steps of fewer rows than the batch.
  const int budget = engine.config().max_num_batched_tokens;
  if (static_cast<int64_t>(a.batch_size) * a.input_len > budget)
    std::printf("Note: the prompts took several steps (%d x %d tokens > --max-num-batched-tokens %d): the decode "
                "figures are those of the steps after the last first token, not of full-batch decode steps\n",
                a.batch_size, a.input_len, budget);
  if (const std::string spec = spec_decode_summary(engine.stats()); !spec.empty()) std::printf("%s\n", spec.c_str());
  if (!a.output_json.empty()) write_json(a.output_json, j);
  engine.shutdown(std::chrono::milliseconds(1000));
  return 0;
}

int run_bench_throughput(const ThroughputArgs& a) {
  if (a.num_prompts <= 0 || a.input_len <= 0 || a.output_len <= 0)
    throw Error("--num-prompts, --input-len and --output-len must be > 0");
  LLM llm(AsyncEngine::create(a.engine));
  AsyncEngine& engine = llm.engine();
  if (a.input_len + a.output_len > engine.max_model_len())
    throw Error("--input-len + --output-len exceeds max_model_len (" + std::to_string(engine.max_model_len()) + ")");
  std::mt19937_64 rng(a.engine.seed);
  auto prompts = random_prompts(a.num_prompts, a.input_len, engine.tokenizer().vocab_size(), rng);
  SamplingParams params;
  params.temperature = 1.0f;
  params.ignore_eos = true;
  params.max_tokens = a.output_len;
  params.detokenize = false;
  auto t0 = Clock::now();
  auto results = llm.generate(prompts, params);
  double elapsed = seconds_since(t0);
  long long prompt_tokens = 0, output_tokens = 0;
  int failed = 0;
  for (const auto& r : results) {
    prompt_tokens += static_cast<long long>(r.prompt_token_ids.size());
    output_tokens += static_cast<long long>(r.output.token_ids.size());
    if (r.output.finish_reason == "error" || r.output.finish_reason == "abort") ++failed;
  }
  if (failed > 0) throw Error("bench throughput: " + std::to_string(failed) + " requests failed");
  long long total = prompt_tokens + output_tokens;
  std::printf("Throughput: %.2f requests/s, %.2f total tokens/s, %.2f output tokens/s\n", a.num_prompts / elapsed,
              total / elapsed, output_tokens / elapsed);
  std::printf("Total num prompt tokens:  %lld\n", prompt_tokens);
  std::printf("Total num output tokens:  %lld\n", output_tokens);
  if (const std::string spec = spec_decode_summary(llm.engine().stats()); !spec.empty()) std::printf("%s\n", spec.c_str());
  if (!a.output_json.empty()) {
    nlohmann::json j;
    j["backend"] = "vireo";
    j["model"] = a.engine.model.empty() ? "(built-in default)" : a.engine.model;
    j["elapsed_time"] = elapsed;
    j["num_requests"] = a.num_prompts;
    j["total_num_tokens"] = total;
    j["total_prompt_tokens"] = prompt_tokens;
    j["total_output_tokens"] = output_tokens;
    j["requests_per_second"] = a.num_prompts / elapsed;
    j["tokens_per_second"] = total / elapsed;
    j["prompt_tokens_per_second"] = prompt_tokens / elapsed;
    j["output_tokens_per_second"] = output_tokens / elapsed;
    write_json(a.output_json, j);
  }
  llm.engine().shutdown(std::chrono::milliseconds(1000));
  return 0;
}

}  // namespace vireo::bench
