// Runs the node scripts of this folder (official openai client) against a live `vireo serve`
// with the real engine and the default model on the CPU. Skips without node or the openai package.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  int port = ntohs(a.sin_port);
  close(fd);
  return port;
}

bool have_node() {
  return std::system("node --version > /dev/null 2>&1") == 0 &&
         std::filesystem::exists(std::string(VIREO_SOURCE_DIR) + "/tools/npm/node_modules/openai/package.json");
}

class ServeProcess {
 public:
  explicit ServeProcess(std::vector<std::string> extra) {
    port_ = free_port();
    std::vector<std::string> args = {std::string(VIREO_BINARY_DIR) + "/vireo", "serve", "--host", "127.0.0.1", "--port",
                                     std::to_string(port_), "--shutdown-timeout", "5"};
    args.insert(args.end(), extra.begin(), extra.end());
    pid_ = fork();
    if (pid_ == 0) {
      std::vector<char*> argv;
      for (auto& s : args) argv.push_back(s.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  ~ServeProcess() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  // Waits for /health 200 (the listener answers 503 while the model loads).
  bool wait_healthy(std::chrono::seconds limit) {
    httplib::Client cli("127.0.0.1", port_);
    cli.set_connection_timeout(1, 0);
    bool saw_503 = false;
    auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        return false;
      }
      if (auto r = cli.Get("/health")) {
        if (r->status == 200) return true;
        saw_503 |= r->status == 503;
      }
      std::this_thread::sleep_for(200ms);
    }
    return false;
  }
  // SIGTERM; returns the exit status (-1 if it did not exit in time).
  int terminate(std::chrono::seconds limit) {
    kill(pid_, SIGTERM);
    auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(50ms);
    }
    return -1;
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  bool exited_ = false;
};

int run_node(const std::string& script, const std::string& url) {
  std::string cmd = "VIREO_URL=" + url + " node " + std::string(VIREO_SOURCE_DIR) + "/tests/server_e2e/" + script;
  int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

}  // namespace

TEST(ServerE2E, OpenAIClientAgainstDefaultModel) {
  if (!have_node()) GTEST_SKIP() << "node or tools/npm/node_modules/openai missing";
  ServeProcess srv({"--max-model-len", "512", "--max-num-seqs", "64"});
  ASSERT_TRUE(srv.wait_healthy(300s)) << "vireo serve did not become healthy";
  EXPECT_EQ(run_node("basic.js", srv.url()), 0);
  EXPECT_EQ(srv.terminate(60s), 0);
}

TEST(ServerE2E, SmallKvCacheForcesPreemptionWithIdenticalOutputs) {
  if (!have_node()) GTEST_SKIP() << "node or tools/npm/node_modules/openai missing";
  // max_model_len 128 = 8 blocks of 16; the cache holds a little more than one full sequence.
  ServeProcess srv({"--max-model-len", "128", "--block-size", "16", "--kv-cache-memory-bytes", "700000",
                    "--no-enable-prefix-caching"});
  ASSERT_TRUE(srv.wait_healthy(300s)) << "vireo serve did not become healthy";
  EXPECT_EQ(run_node("preemption.js", srv.url()), 0);
  EXPECT_EQ(srv.terminate(60s), 0);
}
