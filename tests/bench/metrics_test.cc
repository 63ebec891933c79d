// Serving metrics (vLLM's calculate_metrics), the printed report (golden text produced by
// vLLM's own format strings in Python) and the saved JSON's field names.
#include <gtest/gtest.h>

#include "bench/serve_metrics.h"
#include "core/error.h"

using namespace vireo::bench;

namespace {

std::vector<RequestResult> sample_results() {
  RequestResult a;
  a.success = true;
  a.prompt_len = 10;
  a.output_tokens = 4;
  a.start_time = 0.0;
  a.ttft = 0.1;
  a.itl = {0.05, 0.05, 0.1};
  a.latency = 0.3;
  a.generated_text = "abcd";
  RequestResult b;
  b.success = true;
  b.prompt_len = 20;
  b.output_tokens = 0;  // no usage: counted from the text
  b.start_time = 0.5;
  b.ttft = 0.2;
  b.latency = 0.2;
  b.generated_text = "x";
  RequestResult c;
  c.prompt_len = 30;
  c.error = "boom";
  return {a, b, c};
}

int count_chars(const std::string& s) { return static_cast<int>(s.size()); }

const char* kGolden = R"GOLDEN(============ Serving Benchmark Result ============
Successful requests:                     2         
Failed requests:                         1         
Maximum request concurrency:             8         
Request rate configured (RPS):           4.00      
Benchmark duration (s):                  2.00      
Total input tokens:                      30        
Total generated tokens:                  5         
Request throughput (req/s):              1.00      
Request goodput (req/s):                 0.50      
Output token throughput (tok/s):         2.50      
Peak output token throughput (tok/s):    5.00      
Peak concurrent requests:                1.00      
Total Token throughput (tok/s):          17.50     
---------------Time to First Token----------------
Mean TTFT (ms):                          150.00    
Median TTFT (ms):                        150.00    
P50 TTFT (ms):                           150.00    
P99.9 TTFT (ms):                         199.90    
-----Time per Output Token (excl. 1st token)------
Mean TPOT (ms):                          66.67     
Median TPOT (ms):                        66.67     
P50 TPOT (ms):                           66.67     
P99.9 TPOT (ms):                         66.67     
---------------Inter-token Latency----------------
Mean ITL (ms):                           66.67     
Median ITL (ms):                         50.00     
P50 ITL (ms):                            50.00     
P99.9 ITL (ms):                          99.90     
----------------End-to-end Latency----------------
Mean E2EL (ms):                          250.00    
Median E2EL (ms):                        250.00    
P50 E2EL (ms):                           250.00    
P99.9 E2EL (ms):                         299.90    
==================================================
)GOLDEN";

}  // namespace

TEST(BenchMetrics, ComputesVllmDefinitions) {
  auto rs = sample_results();
  ServeMetrics m = compute_serve_metrics(rs, 2.0, {50, 99.9}, parse_goodput({"ttft:150"}), count_chars);
  EXPECT_EQ(m.completed, 2);
  EXPECT_EQ(m.failed, 1);
  EXPECT_EQ(m.total_input, 30);  // failed requests do not count
  EXPECT_EQ(m.total_output, 5);  // 4 from usage + 1 counted from the text
  EXPECT_EQ(m.actual_output_lens, (std::vector<int>{4, 1, 0}));
  EXPECT_DOUBLE_EQ(m.request_throughput, 1.0);
  EXPECT_DOUBLE_EQ(m.request_goodput, 0.5);
  EXPECT_DOUBLE_EQ(m.output_throughput, 2.5);
  EXPECT_DOUBLE_EQ(m.total_token_throughput, 17.5);
  EXPECT_DOUBLE_EQ(m.max_output_tokens_per_s, 5.0);
  EXPECT_EQ(m.max_concurrent_requests, 1);
  // TPOT only for requests with > 1 output token: (0.3 - 0.1) / 3.
  EXPECT_NEAR(m.summaries["tpot"].mean_ms, 200.0 / 3.0, 1e-9);
  EXPECT_NEAR(m.summaries["ttft"].mean_ms, 150.0, 1e-9);
  EXPECT_NEAR(m.summaries["ttft"].std_ms, 50.0, 1e-9);
  EXPECT_NEAR(m.summaries["itl"].median_ms, 50.0, 1e-9);
  EXPECT_NEAR(m.summaries["e2el"].percentiles_ms[1].second, 299.9, 1e-9);
}

TEST(BenchMetrics, GoldenReport) {
  auto rs = sample_results();
  ServeMetrics m = compute_serve_metrics(rs, 2.0, {50, 99.9}, parse_goodput({"ttft:150"}), count_chars);
  ReportInfo info;
  info.duration_s = 2.0;
  info.request_rate = 4.0;
  info.max_concurrency = 8;
  info.has_goodput = true;
  info.selected_metrics = {"ttft", "tpot", "itl", "e2el"};
  EXPECT_EQ(format_report(m, info), kGolden);
}

TEST(BenchMetrics, ReportOmitsUnsetRateConcurrencyAndUnselectedMetrics) {
  auto rs = sample_results();
  ServeMetrics m = compute_serve_metrics(rs, 2.0, {99}, {}, count_chars);
  ReportInfo info;
  info.duration_s = 2.0;
  info.request_rate = INFINITY;
  info.selected_metrics = {"ttft", "tpot", "itl"};
  std::string r = format_report(m, info);
  EXPECT_EQ(r.find("Request rate configured"), std::string::npos);
  EXPECT_EQ(r.find("Maximum request concurrency"), std::string::npos);
  EXPECT_EQ(r.find("goodput"), std::string::npos);
  EXPECT_EQ(r.find("End-to-end Latency"), std::string::npos);
  EXPECT_NE(r.find("P99 TTFT (ms):                           199.00    \n"), std::string::npos) << r;
}

TEST(BenchMetrics, JsonFieldNames) {
  auto rs = sample_results();
  ServeMetrics m = compute_serve_metrics(rs, 2.0, {99}, {}, count_chars);
  ReportInfo info;
  info.duration_s = 2.0;
  info.request_rate = INFINITY;
  info.selected_metrics = {"ttft", "tpot", "itl"};
  auto j = result_json(m, info, rs);
  for (const char* k : {"duration", "completed", "failed", "total_input_tokens", "total_output_tokens",
                        "request_throughput", "request_goodput", "output_throughput", "total_token_throughput",
                        "max_output_tokens_per_s", "max_concurrent_requests", "input_lens", "output_lens", "ttfts",
                        "itls", "latencies", "start_times", "generated_texts", "errors"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
  for (std::string metric : {"ttft", "tpot", "itl", "e2el"}) {
    for (std::string stat : {"mean_", "median_", "std_", "p99_"}) {
      EXPECT_TRUE(j.contains(stat + metric + "_ms")) << stat + metric + "_ms";
    }
  }
  EXPECT_TRUE(j["request_goodput"].is_null());
  EXPECT_EQ(j["input_lens"], nlohmann::json({10, 20, 30}));
  EXPECT_EQ(j["output_lens"], nlohmann::json({4, 1, 0}));
  EXPECT_EQ(j["errors"][2], "boom");
  EXPECT_EQ(j["itls"][0].size(), 3u);
  EXPECT_DOUBLE_EQ(j["p99_ttft_ms"].get<double>(), 199.0);
}

TEST(BenchMetrics, ParsesFlags) {
  auto g = parse_goodput({"ttft:100", "e2el:2000.5"});
  EXPECT_DOUBLE_EQ(g["ttft"], 100);
  EXPECT_DOUBLE_EQ(g["e2el"], 2000.5);
  EXPECT_THROW(parse_goodput({"itl:5"}), vireo::Error);
  EXPECT_THROW(parse_goodput({"ttft"}), vireo::Error);
  EXPECT_THROW(parse_goodput({"ttft:x"}), vireo::Error);
  EXPECT_THROW(parse_goodput({"ttft:-1"}), vireo::Error);
  EXPECT_EQ(parse_percentiles("50, 90,99.9"), (std::vector<double>{50, 90, 99.9}));
  EXPECT_THROW(parse_percentiles("100"), vireo::Error);
  EXPECT_EQ(parse_metric_names("ttft,e2el"), (std::vector<std::string>{"ttft", "e2el"}));
  EXPECT_THROW(parse_metric_names("ttft,foo"), vireo::Error);
  EXPECT_EQ(percentile_word(99), "99");
  EXPECT_EQ(percentile_word(99.9), "99.9");
  EXPECT_EQ(centered("ab", '-', 7), "--ab---");
}
