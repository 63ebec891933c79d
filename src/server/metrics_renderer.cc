#include "server/metrics_renderer.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>

namespace vireo::server {
namespace {

void header(std::string& out, const std::string& name, const char* help, const char* type) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void sample(std::string& out, const std::string& name, const std::string& labels, double v) {
  out += fmt::format("{}{{{}}} {}\n", name, labels, prom_number(v));
}

void gauge(std::string& out, const std::string& labels, const char* name, const char* help, double v) {
  header(out, name, help, "gauge");
  sample(out, name, labels, v);
}

void counter(std::string& out, const std::string& labels, const char* name, const char* help, double v) {
  header(out, name, help, "counter");
  sample(out, std::string(name) + "_total", labels, v);
}

void histogram(std::string& out, const std::string& labels, const char* name, const char* help, const Histogram& h) {
  header(out, name, help, "histogram");
  uint64_t cumulative = 0;
  for (size_t i = 0; i < h.bounds.size(); ++i) {
    cumulative += i < h.counts.size() ? h.counts[i] : 0;
    sample(out, std::string(name) + "_bucket", fmt::format("{},le=\"{}\"", labels, prom_number(h.bounds[i])),
           static_cast<double>(cumulative));
  }
  sample(out, std::string(name) + "_bucket", labels + ",le=\"+Inf\"", static_cast<double>(h.count));
  sample(out, std::string(name) + "_count", labels, static_cast<double>(h.count));
  sample(out, std::string(name) + "_sum", labels, h.sum);
}

}  // namespace

std::string escape_label_value(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string prom_number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::floor(v) == v && std::fabs(v) < 1e15) return fmt::format("{:.1f}", v);
  return fmt::format("{}", v);
}

std::string render_metrics(const EngineStats& s, const FinishCounts& finished, const std::string& model_name) {
  const std::string labels = "model_name=\"" + escape_label_value(model_name) + "\"";
  std::string out;
  gauge(out, labels, "vllm:num_requests_running", "Number of requests in model execution batches.", s.num_requests_running);
  gauge(out, labels, "vllm:num_requests_waiting", "Number of requests waiting to be processed.", s.num_requests_waiting);
  gauge(out, labels, "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", s.kv_cache_usage);
  if (s.max_loras > 0) {  // vLLM's: the adapters as comma lists in labels, the time of the snapshot as the value
    auto join = [](const std::vector<std::string>& v) {
      std::string j;
      for (const auto& x : v) j += (j.empty() ? "" : ",") + x;
      return escape_label_value(j);
    };
    header(out, "vllm:lora_requests_info", "Running stats on lora requests.", "gauge");
    sample(out, "vllm:lora_requests_info",
           fmt::format("max_lora=\"{}\",waiting_lora_adapters=\"{}\",running_lora_adapters=\"{}\"", s.max_loras,
                       join(s.waiting_loras), join(s.running_loras)),
           static_cast<double>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch()).count()) / 1000.0);
  }
  counter(out, labels, "vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.",
          static_cast<double>(s.prefix_cache_queries));
  counter(out, labels, "vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.",
          static_cast<double>(s.prefix_cache_hits));
  counter(out, labels, "vllm:num_preemptions", "Cumulative number of preemption from the engine.",
          static_cast<double>(s.num_preemptions_total));
  counter(out, labels, "vllm:prompt_tokens", "Number of prefill tokens processed.", static_cast<double>(s.prompt_tokens_total));
  counter(out, labels, "vllm:generation_tokens", "Number of generation tokens processed.",
          static_cast<double>(s.generation_tokens_total));
  if (s.spec_enabled) {  // vLLM's speculative-decoding counters
    counter(out, labels, "vllm:spec_decode_num_drafts", "Number of spec decoding drafts.",
            static_cast<double>(s.spec_num_drafts));
    counter(out, labels, "vllm:spec_decode_num_draft_tokens", "Number of draft tokens.",
            static_cast<double>(s.spec_num_draft_tokens));
    counter(out, labels, "vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.",
            static_cast<double>(s.spec_num_accepted_tokens));
    header(out, "vllm:spec_decode_num_accepted_tokens_per_pos", "Accepted tokens per draft position.", "counter");
    for (size_t i = 0; i < s.spec_accepted_per_pos.size(); ++i)
      sample(out, "vllm:spec_decode_num_accepted_tokens_per_pos_total", labels + ",position=\"" + std::to_string(i) + "\"",
             static_cast<double>(s.spec_accepted_per_pos[i]));
  }
  header(out, "vllm:request_success", "Count of successfully processed requests.", "counter");
  FinishCounts reasons = finished;
  for (const char* r : {"stop", "length", "abort"}) reasons.emplace(r, 0);  // always present, as in vLLM
  for (const auto& [reason, n] : reasons)
    sample(out, "vllm:request_success_total", "finished_reason=\"" + escape_label_value(reason) + "\"," + labels,
           static_cast<double>(n));
  histogram(out, labels, "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
            s.time_to_first_token_seconds);
  histogram(out, labels, "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
            s.inter_token_latency_seconds);
  histogram(out, labels, "vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
            s.e2e_request_latency_seconds);
  return out;
}

}  // namespace vireo::server
