// The load generator against an instant stub server: 1,000 streamed requests at 256 concurrency.
// The client-added latency (server write -> client timestamp of the bytes) is the one timing check
// of the suite: its median must be under 1 ms (issue 5). CI machines are noisy 2-core boxes, so a
// run over the bound is retried (the test fails only when every attempt is over it), and attempts
// where the client thread mostly waited for a CPU are not held to it (see below).
#include <gtest/gtest.h>

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>

#include "bench/arrival.h"
#include "bench/load_runner.h"
#include "bench/stats.h"
#include "stub_sse_server.h"

using namespace vireo::bench;

namespace {
std::vector<SampleRequest> prompts(int n) {
  std::vector<SampleRequest> v;
  for (int i = 0; i < n; ++i) v.push_back({"prompt " + std::to_string(i), 3, 8});
  return v;
}

struct AddedLatency {
  double median_ms = 0, p99_ms = 0, max_ms = 0;
  double cpu_wait = 0;  // fraction of the run the client thread spent runnable but not running
};

// This thread's time waiting on a run queue (ns), from /proc/thread-self/schedstat; -1 if unknown.
long long runqueue_wait_ns() {
  FILE* f = std::fopen("/proc/thread-self/schedstat", "r");
  if (!f) return -1;
  long long run = 0, wait = -1;
  if (std::fscanf(f, "%lld %lld", &run, &wait) != 2) wait = -1;
  std::fclose(f);
  return wait;
}

// One run of 1,000 requests at 256 concurrency; checks the results and returns the added latency.
AddedLatency stub_load_run(int attempt) {
  StubSseServer server(8);
  LoadOptions opt;
  opt.port = server.port();
  opt.model = "stub";
  opt.max_concurrency = 256;
  double duration = 0;
  std::chrono::steady_clock::time_point origin;
  long long wait0 = runqueue_wait_ns();
  auto results = run_load(prompts(1000), opt, &duration, &origin);
  long long wait1 = runqueue_wait_ns();
  EXPECT_EQ(results.size(), 1000u);
  std::vector<double> ttfts, added;
  double origin_s = std::chrono::duration<double>(origin.time_since_epoch()).count();
  for (const auto& r : results) {
    EXPECT_TRUE(r.success) << r.error;
    if (!r.success) continue;
    EXPECT_EQ(r.output_tokens, 8);
    EXPECT_EQ(r.generated_text.rfind("T", 0), 0u);
    EXPECT_NE(r.generated_text.find("t1t2t3t4t5t6t7"), std::string::npos);
    EXPECT_GE(r.latency, r.ttft);
    EXPECT_EQ(r.itl.size(), 7u);
    ttfts.push_back(r.ttft);
    // Added latency: the server stamped the first chunk T<ns> right before writing it; the client
    // stamped it right after the read that delivered it, at origin + start_time + ttft (both on
    // the steady clock).
    double server_write_s = std::stoll(r.generated_text.substr(1, r.generated_text.find('t') - 1)) * 1e-9;
    added.push_back(origin_s + r.start_time + r.ttft - server_write_s);
  }
  EXPECT_EQ(server.num_requests(), 1000);
  ServeMetrics m = compute_serve_metrics(results, duration, {50, 99}, {}, [](const std::string&) { return 0; });
  EXPECT_EQ(m.completed, 1000);
  EXPECT_EQ(m.total_output, 8000);
  EXPECT_LE(m.max_concurrent_requests, 256);
  AddedLatency a;
  if (added.empty()) return a;
  EXPECT_GE(*std::min_element(added.begin(), added.end()), 0.0) << "client stamp before the server write?";
  a.median_ms = median(added) * 1000;
  a.p99_ms = percentile(added, 99) * 1000;
  a.max_ms = *std::max_element(added.begin(), added.end()) * 1000;
  a.cpu_wait = wait0 >= 0 && wait1 >= 0 && duration > 0 ? (wait1 - wait0) * 1e-9 / duration : 0;
  std::printf("[bench] attempt %d: 1000 requests @256 concurrency against an instant server: %.3f s; "
              "client-added latency (server write -> client stamp) median %.3f ms, p99 %.3f ms, max %.3f ms; "
              "TTFT median %.3f ms (incl. queueing behind 255 others); the client thread waited for a CPU %.0f%% of the run\n",
              attempt, duration, a.median_ms, a.p99_ms, a.max_ms, median(ttfts) * 1000, a.cpu_wait * 100);
  std::fflush(stdout);
  return a;
}
}  // namespace

TEST(BenchLoad, Stub1000RequestsAt256Concurrency) {
  constexpr double kMedianBoundMs = 1.0;       // issue 5: the client must not be the bottleneck
  constexpr double kP99BoundMs = 50.0;         // generous: a descheduled client thread shows up here
  constexpr double kOverloadedBoundMs = 10.0;  // the median when no attempt had a CPU to itself
  constexpr double kMaxCpuWait = 0.2;          // an attempt is judged if its thread waited less
  constexpr int kAttempts = 3;                 // a busy CI box can spoil a run; fail only if all do
  // Added latency is scheduling noise when the client thread is runnable but has no CPU (a 2-core
  // box running compilers). Any attempt under the bounds passes; when none is, the 1 ms bound fails
  // the test if some attempt had its thread wait for a CPU under 20% of the run, and otherwise (all
  // attempts overloaded) only the looser bound applies.
  std::optional<AddedLatency> best;
  bool judged = false;
  for (int attempt = 1; attempt <= kAttempts; ++attempt) {
    AddedLatency a = stub_load_run(attempt);
    if (HasFailure()) return;
    if (!best || a.median_ms < best->median_ms) best = a;
    judged = judged || a.cpu_wait < kMaxCpuWait;
    if (best->median_ms < kMedianBoundMs && best->p99_ms < kP99BoundMs) break;
  }
  if (best->median_ms >= kMedianBoundMs && !judged) {
    std::printf("[bench] the machine is overloaded (the client thread waited for a CPU over %.0f%% of every "
                "attempt): the 1 ms median bound is not judged, only %.0f ms\n", kMaxCpuWait * 100, kOverloadedBoundMs);
    EXPECT_LT(best->median_ms, kOverloadedBoundMs) << "the client adds too much latency";
  } else {
    EXPECT_LT(best->median_ms, kMedianBoundMs) << "the client adds too much latency (best attempt)";
  }
  EXPECT_LT(best->p99_ms, kP99BoundMs) << "the client adds too much latency (best attempt)";
}

TEST(BenchLoad, RateLimitedRunKeepsOrderAndSpacing) {
  StubSseServer server(2);
  LoadOptions opt;
  opt.port = server.port();
  opt.request_rate = 200.0;  // ~5 ms apart
  opt.seed = 3;
  double duration = 0;
  auto results = run_load(prompts(50), opt, &duration);
  for (size_t i = 0; i < results.size(); ++i) {
    ASSERT_TRUE(results[i].success) << results[i].error;
    if (i > 0) {
      EXPECT_GE(results[i].start_time, results[i - 1].start_time);
    }
  }
  // Requests are not sent before their scheduled arrival time.
  auto offsets = vireo::bench::arrival_offsets(50, 200.0, 1.0, 3);
  for (size_t i = 0; i < results.size(); ++i) EXPECT_GE(results[i].start_time + 1e-9, offsets[i]);
}

TEST(BenchLoad, ConnectionRefusedFailsEveryRequest) {
  int port;
  {
    StubSseServer s(1);  // grab a free port, then close it
    port = s.port();
  }
  LoadOptions opt;
  opt.port = port;
  auto results = run_load(prompts(5), opt, nullptr);
  for (const auto& r : results) {
    EXPECT_FALSE(r.success);
    EXPECT_NE(r.error.find("connect failed"), std::string::npos) << r.error;
  }
}

TEST(BenchLoad, WorksWithHttplibChunkedServer) {
  // cpp-httplib's chunked SSE output (what `vireo serve` is built on) through the client.
  httplib::Server svr;
  svr.Post("/v1/chat/completions", [](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("text/event-stream", [](size_t, httplib::DataSink& sink) {
      for (const char* t : {"a", "b", "c"}) {
        std::string ev = std::string("data: {\"choices\":[{\"delta\":{\"content\":\"") + t + "\"}}]}\n\n";
        sink.write(ev.data(), ev.size());
      }
      std::string usage = "data: {\"choices\":[],\"usage\":{\"completion_tokens\":3}}\n\ndata: [DONE]\n\n";
      sink.write(usage.data(), usage.size());
      sink.done();
      return true;
    });
  });
  int port = svr.bind_to_any_port("127.0.0.1");
  std::thread th([&] { svr.listen_after_bind(); });
  while (!svr.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  LoadOptions opt;
  opt.backend = Backend::kChat;
  opt.port = port;
  opt.path = "/v1/chat/completions";
  opt.max_concurrency = 4;
  auto results = run_load(prompts(20), opt, nullptr);
  svr.stop();
  th.join();
  for (const auto& r : results) {
    ASSERT_TRUE(r.success) << r.error;
    EXPECT_EQ(r.generated_text, "abc");
    EXPECT_EQ(r.output_tokens, 3);
  }
}
