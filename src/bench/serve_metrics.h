// Per-request results of `bench serve` and the aggregate metrics, report text and JSON, with
// vLLM's definitions (vllm/benchmarks/serve.py calculate_metrics) and field names.
#pragma once
#include <nlohmann/json.hpp>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace vireo::bench {

struct RequestResult {
  bool success = false;
  int prompt_len = 0;
  int output_tokens = 0;        // from the server's usage; 0 = unknown (count the text)
  double start_time = 0.0;      // seconds since the benchmark start, when the request was sent
  double ttft = 0.0;            // s: send -> first non-empty content chunk
  std::vector<double> itl;      // s: gaps between content chunks
  double latency = 0.0;         // s: send -> end of stream
  std::string generated_text;
  std::string error;
};

struct MetricSummary {
  double mean_ms = 0, median_ms = 0, std_ms = 0;
  std::vector<std::pair<double, double>> percentiles_ms;  // (p, value)
};

struct ServeMetrics {
  int completed = 0;
  int failed = 0;
  long long total_input = 0;
  long long total_output = 0;
  double request_throughput = 0;
  double request_goodput = 0;
  double output_throughput = 0;
  double total_token_throughput = 0;
  double max_output_tokens_per_s = 0;
  int max_concurrent_requests = 0;
  std::map<std::string, MetricSummary> summaries;  // "ttft", "tpot", "itl", "e2el"
  std::vector<int> actual_output_lens;            // per request (0 when failed)
};

// Goodput SLOs in milliseconds, keyed "ttft" | "tpot" | "e2el".
using GoodputConfig = std::map<std::string, double>;
// Parses ["ttft:100", "tpot:20"]; throws vireo::Error on a bad pair or name.
GoodputConfig parse_goodput(const std::vector<std::string>& pairs);
// "50,90,99" -> {50, 90, 99}; "ttft,tpot" -> {"ttft","tpot"}.
std::vector<double> parse_percentiles(const std::string& csv);
std::vector<std::string> parse_metric_names(const std::string& csv);

// `count_tokens` counts the tokens of a generated text when the server gave no usage.
template <typename F>
ServeMetrics compute_serve_metrics(const std::vector<RequestResult>& outputs, double duration_s,
                                   const std::vector<double>& percentiles, const GoodputConfig& goodput,
                                   F&& count_tokens);
ServeMetrics compute_serve_metrics_impl(const std::vector<RequestResult>& outputs, double duration_s,
                                        const std::vector<double>& percentiles, const GoodputConfig& goodput,
                                        const std::vector<int>& output_lens);

struct ReportInfo {
  double duration_s = 0;
  double request_rate = 0;            // inf when not set
  std::optional<int> max_concurrency;
  bool has_goodput = false;
  std::vector<std::string> selected_metrics;  // ttft,tpot,itl,e2el in any subset
};

// vLLM's printed report ("{:<40} {:<10}" lines), ending with "=" * 50 and a newline.
std::string format_report(const ServeMetrics& m, const ReportInfo& info);
// The result dict vLLM saves (without the run header fields, which the caller adds).
nlohmann::json result_json(const ServeMetrics& m, const ReportInfo& info,
                           const std::vector<RequestResult>& outputs);
// "{:<40} {:<10.2f}"-style helpers, exposed for tests.
std::string report_line(const std::string& label, const std::string& value);
std::string report_line(const std::string& label, double value);
std::string centered(const std::string& text, char fill, int width);  // "{s:{c}^{n}}"
std::string percentile_word(double p);  // 99 -> "99", 99.9 -> "99.9"

template <typename F>
ServeMetrics compute_serve_metrics(const std::vector<RequestResult>& outputs, double duration_s,
                                   const std::vector<double>& percentiles, const GoodputConfig& goodput,
                                   F&& count_tokens) {
  std::vector<int> lens;
  lens.reserve(outputs.size());
  for (const auto& o : outputs) {
    if (!o.success) lens.push_back(0);
    else if (o.output_tokens > 0) lens.push_back(o.output_tokens);
    else lens.push_back(count_tokens(o.generated_text));
  }
  return compute_serve_metrics_impl(outputs, duration_s, percentiles, goodput, lens);
}

}  // namespace vireo::bench
