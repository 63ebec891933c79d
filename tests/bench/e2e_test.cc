// End to end through the vireo binary: `vireo bench serve` against `vireo serve` (the built-in
// tiny model on CPU), and `vireo bench latency` / `throughput` in-process. The serve test skips
// when the server cannot start (e.g. before the server has landed).
#include <gtest/gtest.h>

#include <httplib.h>
#include <nlohmann/json.hpp>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

namespace fs = std::filesystem;

namespace {

const std::string kVireo = VIREO_BINARY_DIR "/vireo";

int run(const std::string& cmd, std::string* out) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out->append(buf, n);
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// Binds port 0 and closes the socket again. (httplib::Server::bind_to_any_port would leave a
// SO_REUSEPORT listener open in this process, which then steals half of the server's connections.)
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

nlohmann::json read_json(const fs::path& p) {
  std::ifstream f(p);
  return nlohmann::json::parse(f);
}

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / (name + "-" + std::to_string(getpid()));
  fs::create_directories(d);
  return d;
}

class ServerProcess {
 public:
  explicit ServerProcess(int port) {
    pid_ = fork();
    if (pid_ == 0) {
      std::string p = std::to_string(port);
      FILE* log = std::freopen((fs::temp_directory_path() / "vireo-bench-e2e-serve.log").c_str(), "w", stdout);
      (void)log;
      dup2(STDOUT_FILENO, STDERR_FILENO);
      execl(kVireo.c_str(), kVireo.c_str(), "serve", "--host", "127.0.0.1", "--port", p.c_str(), "--device", "cpu",
            "--kv-cache-memory-bytes", "67108864", static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  ~ServerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      for (int i = 0; i < 100; ++i) {
        if (waitpid(pid_, nullptr, WNOHANG) == pid_) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  bool exited() { return waitpid(pid_, nullptr, WNOHANG) == pid_ ? (pid_ = -1, true) : false; }

 private:
  pid_t pid_ = -1;
};

}  // namespace

TEST(BenchE2E, BenchServeAgainstVireoServe) {
  if (!fs::exists(kVireo)) GTEST_SKIP() << kVireo << " not built";
  int port = free_port();
  ServerProcess server(port);
  httplib::Client cli("127.0.0.1", port);
  bool ready = false;
  for (int i = 0; i < 600 && !ready; ++i) {  // up to 60 s for the model to load
    if (server.exited()) break;
    auto res = cli.Get("/v1/models");
    ready = res && res->status == 200;
    if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!ready) GTEST_SKIP() << "vireo serve did not start (see " << (fs::temp_directory_path() / "vireo-bench-e2e-serve.log") << ")";

  fs::path dir = temp_dir("vireo-bench-e2e");
  for (std::string backend : {"openai", "openai-chat"}) {
    std::string out;
    std::string cmd = kVireo + " bench serve --backend " + backend + " --port " + std::to_string(port) +
                      " --dataset-name random --random-input-len 24 --random-output-len 6 --num-prompts 12"
                      " --max-concurrency 4 --ignore-eos --seed 1 --disable-tqdm --save-result --save-detailed --result-dir " +
                      dir.string() + " --result-filename " + backend + ".json --percentile-metrics ttft,tpot,itl,e2el"
                      " --metric-percentiles 50,99";
    int rc = run(cmd, &out);
    std::printf("%s\n", out.c_str());
    ASSERT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("============ Serving Benchmark Result ============"), std::string::npos);
    EXPECT_NE(out.find("Successful requests:                     12"), std::string::npos) << out;
    EXPECT_NE(out.find("P99 E2EL (ms):"), std::string::npos);
    auto j = read_json(dir / (backend + ".json"));
    EXPECT_EQ(j["completed"], 12);
    EXPECT_EQ(j["failed"], 0);
    EXPECT_EQ(j["num_prompts"], 12);
    EXPECT_EQ(j["backend"], backend);
    EXPECT_EQ(j["max_concurrency"], 4);
    EXPECT_EQ(j["request_rate"], "inf");
    long long in_sum = 0, out_sum = 0;
    for (auto& v : j["input_lens"]) in_sum += v.get<long long>();
    for (auto& v : j["output_lens"]) {
      EXPECT_EQ(v.get<int>(), 6);  // ignore_eos: every request generates exactly max_tokens
      out_sum += v.get<long long>();
    }
    EXPECT_EQ(j["total_input_tokens"].get<long long>(), in_sum);
    EXPECT_EQ(j["total_output_tokens"].get<long long>(), out_sum);
    EXPECT_EQ(out_sum, 72);
    for (auto& e : j["errors"]) EXPECT_EQ(e, "");
    for (auto& t : j["ttfts"]) EXPECT_GT(t.get<double>(), 0.0);
    EXPECT_LE(j["max_concurrent_requests"].get<int>(), 4);
    EXPECT_GT(j["request_throughput"].get<double>(), 0.0);
  }
  // vLLM's result options: without --save-detailed no per-request arrays; --append-result adds a JSON line;
  // --metadata KEY=VALUE pairs land in the result; sampling flags go out with the requests.
  for (int k = 0; k < 2; ++k) {
    std::string out;
    const std::string cmd = kVireo + " bench serve --port " + std::to_string(port) +
                            " --dataset-name random --random-input-len 16 --random-output-len 4 --num-prompts 3"
                            " --disable-tqdm --temperature 0.8 --top-k 5 --save-result --append-result --result-dir " +
                            dir.string() + " --result-filename appended.json --metadata run=" + std::to_string(k) +
                            " gpu=none --trust-remote-code";
    ASSERT_EQ(run(cmd, &out), 0) << out;
  }
  std::ifstream appended(dir / "appended.json");
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(appended, line);)
    if (!line.empty()) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["run"], "0");
  EXPECT_EQ(lines[1]["run"], "1");
  EXPECT_EQ(lines[1]["gpu"], "none");
  EXPECT_EQ(lines[1]["completed"], 3);
  EXPECT_FALSE(lines[1].contains("ttfts"));
  EXPECT_FALSE(lines[1].contains("generated_texts"));
  fs::remove_all(dir);
}

TEST(BenchE2E, BenchThroughputAndLatencyInProcess) {
  if (!fs::exists(kVireo)) GTEST_SKIP() << kVireo << " not built";
  fs::path dir = temp_dir("vireo-bench-offline");
  std::string out;
  int rc = run(kVireo + " bench throughput --device cpu --kv-cache-memory-bytes 67108864 --num-prompts 6 --input-len 16 --output-len 5 --output-json " +
                   (dir / "t.json").string(), &out);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("Throughput:"), std::string::npos) << out;
  auto t = read_json(dir / "t.json");
  EXPECT_EQ(t["num_requests"], 6);
  EXPECT_EQ(t["total_prompt_tokens"], 96);
  EXPECT_EQ(t["total_output_tokens"], 30);
  EXPECT_EQ(t["total_num_tokens"], 126);
  EXPECT_GT(t["requests_per_second"].get<double>(), 0.0);

  out.clear();
  rc = run(kVireo + " bench latency --device cpu --kv-cache-memory-bytes 67108864 --batch-size 2 --input-len 8 --output-len 4 --num-iters-warmup 1"
                    " --num-iters 3 --output-json " + (dir / "l.json").string(), &out);
  ASSERT_EQ(rc, 0) << out;
  auto l = read_json(dir / "l.json");
  EXPECT_EQ(l["latencies"].size(), 3u);
  EXPECT_EQ(l["prefill_time_ms_list"].size(), 3u);
  for (const char* k : {"avg_latency", "mean_prefill_time_ms", "mean_decode_step_ms", "mean_decode_tokens_per_s",
                        "mean_output_tokens_per_s", "percentiles"})
    EXPECT_TRUE(l.contains(k)) << k;
  // End to end: batch x output tokens over the mean latency (one value per iteration, same mean here).
  EXPECT_NEAR(l["mean_output_tokens_per_s"].get<double>() * l["avg_latency"].get<double>(), 2 * 4,
              0.5 * 2 * 4);
  for (size_t i = 0; i < 3; ++i) {
    double lat_ms = l["latencies"][i].get<double>() * 1000;
    double pre_ms = l["prefill_time_ms_list"][i].get<double>();
    EXPECT_GT(pre_ms, 0.0);
    EXPECT_LE(pre_ms, lat_ms + 1e-6);
  }
  fs::remove_all(dir);
}
