#include "bench/serve_metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "bench/stats.h"
#include "core/error.h"

namespace vireo::bench {

namespace {

std::vector<std::string> split_csv(const std::string& csv) {
  std::vector<std::string> out;
  std::stringstream ss(csv);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

MetricSummary summarize(const std::vector<double>& xs_s, const std::vector<double>& percentiles) {
  MetricSummary s;
  s.mean_ms = mean(xs_s) * 1000.0;
  s.median_ms = median(xs_s) * 1000.0;
  s.std_ms = stddev(xs_s) * 1000.0;
  for (double p : percentiles) s.percentiles_ms.emplace_back(p, percentile(xs_s, p) * 1000.0);
  return s;
}

struct MetricName {
  const char* key;
  const char* name;
  const char* header;
};
constexpr MetricName kMetricNames[] = {
    {"ttft", "TTFT", "Time to First Token"},
    {"tpot", "TPOT", "Time per Output Token (excl. 1st token)"},
    {"itl", "ITL", "Inter-token Latency"},
    {"e2el", "E2EL", "End-to-end Latency"},
};

}  // namespace

GoodputConfig parse_goodput(const std::vector<std::string>& pairs) {
  GoodputConfig cfg;
  for (const auto& pair : pairs) {
    auto colon = pair.find(':');
    if (colon == std::string::npos)
      throw Error("--goodput: expected KEY:VALUE (e.g. ttft:100), got '" + pair + "'");
    std::string key = pair.substr(0, colon);
    double value = 0;
    try {
      size_t used = 0;
      value = std::stod(pair.substr(colon + 1), &used);
      if (used != pair.size() - colon - 1) throw std::invalid_argument("trailing");
    } catch (const std::exception&) {
      throw Error("--goodput: value of '" + pair + "' is not a number (milliseconds)");
    }
    if (key != "ttft" && key != "tpot" && key != "e2el")
      throw Error("--goodput: metric must be one of ttft, tpot, e2el, got '" + key + "'");
    if (value < 0) throw Error("--goodput: value of '" + pair + "' must be non-negative");
    cfg[key] = value;
  }
  return cfg;
}

std::vector<double> parse_percentiles(const std::string& csv) {
  std::vector<double> out;
  for (const auto& s : split_csv(csv)) {
    double p = 0;
    try {
      p = std::stod(s);
    } catch (const std::exception&) {
      throw Error("--metric-percentiles: '" + s + "' is not a number");
    }
    if (p <= 0 || p >= 100) throw Error("--metric-percentiles: " + s + " is not in (0, 100)");
    out.push_back(p);
  }
  return out;
}

std::vector<std::string> parse_metric_names(const std::string& csv) {
  auto names = split_csv(csv);
  for (const auto& n : names) {
    if (n != "ttft" && n != "tpot" && n != "itl" && n != "e2el")
      throw Error("--percentile-metrics: unknown metric '" + n + "' (ttft, tpot, itl, e2el)");
  }
  return names;
}

ServeMetrics compute_serve_metrics_impl(const std::vector<RequestResult>& outputs, double duration_s,
                                        const std::vector<double>& percentiles, const GoodputConfig& goodput,
                                        const std::vector<int>& output_lens) {
  ServeMetrics m;
  m.actual_output_lens = output_lens;
  std::vector<double> ttfts, tpots, all_tpots, itls, e2els;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const auto& o = outputs[i];
    if (!o.success) {
      ++m.failed;
      continue;
    }
    int out_len = output_lens[i];
    m.total_input += o.prompt_len;
    m.total_output += out_len;
    double tpot = 0.0;
    if (out_len > 1) {
      tpot = (o.latency - o.ttft) / (out_len - 1);
      tpots.push_back(tpot);
    }
    all_tpots.push_back(tpot);  // vLLM: tpot counts as 0 for goodput when output_len <= 1
    itls.insert(itls.end(), o.itl.begin(), o.itl.end());
    ttfts.push_back(o.ttft);
    e2els.push_back(o.latency);
    ++m.completed;
  }

  if (!goodput.empty()) {
    int good = 0;
    for (size_t k = 0; k < ttfts.size(); ++k) {
      bool ok = true;
      if (auto it = goodput.find("ttft"); it != goodput.end()) ok = ok && ttfts[k] <= it->second / 1000.0;
      if (auto it = goodput.find("tpot"); it != goodput.end()) ok = ok && all_tpots[k] <= it->second / 1000.0;
      if (auto it = goodput.find("e2el"); it != goodput.end()) ok = ok && e2els[k] <= it->second / 1000.0;
      good += ok;
    }
    m.request_goodput = duration_s > 0 ? good / duration_s : 0.0;
  }

  // Peak output tokens/s: token timestamps bucketed into whole seconds from the first start;
  // peak concurrency: sweep over half-open [start, end) intervals (as vLLM).
  double min_start = INFINITY, max_end = -INFINITY;
  for (const auto& o : outputs) {
    if (!o.success) continue;
    min_start = std::min(min_start, o.start_time);
    max_end = std::max(max_end, o.start_time + o.latency);
  }
  if (m.completed > 0) {
    size_t nbuckets = static_cast<size_t>(std::ceil(max_end - min_start)) + 1;
    std::vector<double> per_second(nbuckets, 0.0);
    std::vector<std::pair<double, int>> events;
    for (const auto& o : outputs) {
      if (!o.success) continue;
      double t = o.start_time + o.ttft;
      auto add = [&](double tt) {
        double b = std::floor(tt - min_start);
        if (b >= 0 && b < static_cast<double>(nbuckets)) per_second[static_cast<size_t>(b)] += 1;
      };
      add(t);
      for (double gap : o.itl) add(t += gap);
      events.emplace_back(o.start_time, 1);
      events.emplace_back(o.start_time + o.latency, -1);
    }
    std::sort(events.begin(), events.end());
    int cur = 0;
    for (auto& e : events) m.max_concurrent_requests = std::max(m.max_concurrent_requests, cur += e.second);
    m.max_output_tokens_per_s = *std::max_element(per_second.begin(), per_second.end());
  }

  if (duration_s > 0) {
    m.request_throughput = m.completed / duration_s;
    m.output_throughput = m.total_output / duration_s;
    m.total_token_throughput = (m.total_input + m.total_output) / duration_s;
  }
  m.summaries["ttft"] = summarize(ttfts, percentiles);
  m.summaries["tpot"] = summarize(tpots, percentiles);
  m.summaries["itl"] = summarize(itls, percentiles);
  m.summaries["e2el"] = summarize(e2els, percentiles);
  return m;
}

std::string centered(const std::string& text, char fill, int width) {
  // Python's str.format "^": extra padding goes to the right.
  int pad = width - static_cast<int>(text.size());
  if (pad <= 0) return text;
  int left = pad / 2;
  return std::string(left, fill) + text + std::string(pad - left, fill);
}

std::string report_line(const std::string& label, const std::string& value) {
  return fmt::format("{:<40} {:<10}\n", label, value);
}

std::string report_line(const std::string& label, double value) {
  return fmt::format("{:<40} {:<10.2f}\n", label, value);
}

std::string percentile_word(double p) {
  if (std::floor(p) == p) return std::to_string(static_cast<long long>(p));
  return fmt::format("{}", p);
}

std::string format_report(const ServeMetrics& m, const ReportInfo& info) {
  std::string s;
  s += centered(" Serving Benchmark Result ", '=', 50) + "\n";
  s += report_line("Successful requests:", std::to_string(m.completed));
  s += report_line("Failed requests:", std::to_string(m.failed));
  if (info.max_concurrency) s += report_line("Maximum request concurrency:", std::to_string(*info.max_concurrency));
  if (!std::isinf(info.request_rate)) s += report_line("Request rate configured (RPS):", info.request_rate);
  s += report_line("Benchmark duration (s):", info.duration_s);
  s += report_line("Total input tokens:", std::to_string(m.total_input));
  s += report_line("Total generated tokens:", std::to_string(m.total_output));
  s += report_line("Request throughput (req/s):", m.request_throughput);
  if (info.has_goodput) s += report_line("Request goodput (req/s):", m.request_goodput);
  s += report_line("Output token throughput (tok/s):", m.output_throughput);
  s += report_line("Peak output token throughput (tok/s):", m.max_output_tokens_per_s);
  s += report_line("Peak concurrent requests:", static_cast<double>(m.max_concurrent_requests));
  s += report_line("Total Token throughput (tok/s):", m.total_token_throughput);
  for (const auto& mn : kMetricNames) {
    if (std::find(info.selected_metrics.begin(), info.selected_metrics.end(), mn.key) == info.selected_metrics.end())
      continue;
    const auto& sum = m.summaries.at(mn.key);
    s += centered(mn.header, '-', 50) + "\n";
    s += report_line(fmt::format("Mean {} (ms):", mn.name), sum.mean_ms);
    s += report_line(fmt::format("Median {} (ms):", mn.name), sum.median_ms);
    for (auto& [p, v] : sum.percentiles_ms) s += report_line(fmt::format("P{} {} (ms):", percentile_word(p), mn.name), v);
  }
  s += std::string(50, '=') + "\n";
  return s;
}

nlohmann::json result_json(const ServeMetrics& m, const ReportInfo& info, const std::vector<RequestResult>& outputs) {
  nlohmann::json r;
  r["duration"] = info.duration_s;
  r["completed"] = m.completed;
  r["failed"] = m.failed;
  r["total_input_tokens"] = m.total_input;
  r["total_output_tokens"] = m.total_output;
  r["request_throughput"] = m.request_throughput;
  r["request_goodput"] = info.has_goodput ? nlohmann::json(m.request_goodput) : nlohmann::json(nullptr);
  r["output_throughput"] = m.output_throughput;
  r["total_token_throughput"] = m.total_token_throughput;
  auto& input_lens = r["input_lens"] = nlohmann::json::array();
  auto& ttfts = r["ttfts"] = nlohmann::json::array();
  auto& itls = r["itls"] = nlohmann::json::array();
  auto& latencies = r["latencies"] = nlohmann::json::array();
  auto& start_times = r["start_times"] = nlohmann::json::array();
  auto& texts = r["generated_texts"] = nlohmann::json::array();
  auto& errors = r["errors"] = nlohmann::json::array();
  for (const auto& o : outputs) {
    input_lens.push_back(o.prompt_len);
    ttfts.push_back(o.ttft);
    itls.push_back(o.itl);
    latencies.push_back(o.latency);
    start_times.push_back(o.start_time);
    texts.push_back(o.generated_text);
    errors.push_back(o.error);
  }
  r["output_lens"] = m.actual_output_lens;
  r["max_output_tokens_per_s"] = m.max_output_tokens_per_s;
  r["max_concurrent_requests"] = m.max_concurrent_requests;
  // All four summaries are saved (vLLM saves only the selected ones; a superset keeps every
  // saved result comparable whatever --percentile-metrics was).
  for (const auto& mn : kMetricNames) {
    const auto& sum = m.summaries.at(mn.key);
    std::string k = mn.key;
    r["mean_" + k + "_ms"] = sum.mean_ms;
    r["median_" + k + "_ms"] = sum.median_ms;
    r["std_" + k + "_ms"] = sum.std_ms;
    for (auto& [p, v] : sum.percentiles_ms) r["p" + percentile_word(p) + "_" + k + "_ms"] = v;
  }
  return r;
}

}  // namespace vireo::bench
