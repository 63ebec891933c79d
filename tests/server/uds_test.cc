// vLLM's --uds: the server listens on a Unix domain socket instead of host:port (server_context.h's
// ServerOptions::uds); a stale socket file is replaced, another file is refused, and the socket file goes
// when the server stops.
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "core/error.h"
#include "fake_engine.h"
#include "server/api_server.h"

namespace vireo {
namespace {

std::string socket_path(const char* tag) {
  return (std::filesystem::temp_directory_path() / ("vireo_uds_" + std::to_string(getpid()) + "_" + tag + ".sock"))
      .string();
}

httplib::Client uds_client(const std::string& path) {
  httplib::Client c(path);
  c.set_address_family(AF_UNIX);
  c.set_read_timeout(30, 0);
  return c;
}

void serve_once(const std::string& path) {
  server::ServerOptions opts;
  opts.uds = path;
  opts.host = "256.0.0.1";  // ignored with uds (as vLLM's host and port)
  opts.shutdown_timeout_s = 1;
  server::ApiServer srv(opts);
  EXPECT_EQ(srv.bind(), 0);
  EXPECT_TRUE(std::filesystem::is_socket(path));
  std::thread t([&] { srv.run(); });
  auto engine = std::make_shared<testing::FakeEngine>(testing::FakeEngineOptions{});
  srv.set_engine(engine);
  auto cli = uds_client(path);
  auto health = cli.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto models = cli.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 200);
  EXPECT_NE(models->body.find("\"data\""), std::string::npos) << models->body;
  srv.stop();
  t.join();
  engine->shutdown(std::chrono::milliseconds(0));
  EXPECT_FALSE(std::filesystem::exists(path)) << "the socket file stays after stop()";
}

TEST(UnixSocket, ServesOverTheSocketAndRemovesIt) {
  const std::string path = socket_path("a");
  serve_once(path);
  // A socket file left behind (a killed server) is replaced, as uvicorn does.
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  path.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ::close(fd);  // the file stays, as a killed server leaves it
  ASSERT_TRUE(std::filesystem::is_socket(path));
  serve_once(path);
}

TEST(UnixSocket, RefusesAPathThatIsNotASocket) {
  const std::string path = socket_path("file");
  std::ofstream(path) << "data";
  server::ServerOptions opts;
  opts.uds = path;
  server::ApiServer srv(opts);
  EXPECT_THROW(srv.bind(), Error);
  EXPECT_TRUE(std::filesystem::is_regular_file(path)) << "a regular file must not be replaced";
  std::filesystem::remove(path);
  server::ServerOptions long_opts;
  long_opts.uds = "/tmp/" + std::string(200, 'x');
  server::ApiServer too_long(long_opts);
  EXPECT_THROW(too_long.bind(), Error);
}

}  // namespace
}  // namespace vireo
