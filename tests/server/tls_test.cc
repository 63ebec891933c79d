// HTTPS (vLLM's --ssl-certfile / --ssl-keyfile / --ssl-ca-certs / --ssl-cert-reqs): the server answers over
// TLS with its certificate, refuses plain HTTP on that port, asks for client certificates only when told,
// and refuses to start with a certificate or key it cannot use. tests/fixtures/tls: a self-signed EC
// certificate for localhost / 127.0.0.1 (CA:TRUE, valid to 2126) and its key, made with
//   openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout key.pem -out cert.pem
//     -days 36500 -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1
#include <gtest/gtest.h>
#include <httplib.h>

#include <memory>
#include <string>

#include "core/error.h"
#include "server_fixture.h"

namespace vireo::testing {
namespace {

const std::string kDir = std::string(VIREO_SOURCE_DIR) + "/tests/fixtures/tls/";

server::ServerOptions tls_options(int cert_reqs = 0) {
  server::ServerOptions o;
  o.tls.certfile = kDir + "cert.pem";
  o.tls.keyfile = kDir + "key.pem";
  if (cert_reqs > 0) o.tls.ca_certs = kDir + "cert.pem";
  o.tls.cert_reqs = cert_reqs;
  return o;
}

std::unique_ptr<httplib::SSLClient> tls_client(int port, bool with_client_cert = false) {
  auto c = with_client_cert ? std::make_unique<httplib::SSLClient>("127.0.0.1", port, kDir + "cert.pem", kDir + "key.pem")
                            : std::make_unique<httplib::SSLClient>("127.0.0.1", port);
  c->set_ca_cert_path((kDir + "cert.pem").c_str());  // the server's certificate is checked against itself
  c->enable_server_certificate_verification(true);
  c->set_read_timeout(30, 0);
  return c;
}

TEST(TlsServer, ServesHttpsWithItsCertificate) {
  LiveServer srv(tls_options());
  auto c = tls_client(srv.port());
  auto health = c->Get("/health");
  ASSERT_TRUE(health) << httplib::to_string(health.error());
  EXPECT_EQ(health->status, 200);
  auto r = c->Post("/v1/completions", R"({"model":"fake-model","prompt":"hi","max_tokens":3})", "application/json");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(nlohmann::json::parse(r->body)["object"], "text_completion");
  // A stream over TLS: chunks, then [DONE].
  auto s = c->Post("/v1/completions", R"({"model":"fake-model","prompt":"hi","max_tokens":3,"stream":true})", "application/json");
  ASSERT_TRUE(s);
  bool done = false;
  EXPECT_FALSE(parse_sse(s->body, &done).empty());
  EXPECT_TRUE(done);
}

TEST(TlsServer, PlainHttpOnTheTlsPortGetsNoAnswer) {
  LiveServer srv(tls_options());
  httplib::Client plain("127.0.0.1", srv.port());
  plain.set_read_timeout(3, 0);
  auto r = plain.Get("/health");
  EXPECT_TRUE(!r || r->status >= 400);
}

TEST(TlsServer, ClientCertificateRequiredWhenAsked) {
  LiveServer srv(tls_options(/*cert_reqs=*/2));
  auto without = tls_client(srv.port());
  EXPECT_FALSE(without->Get("/health")) << "a client without a certificate was served";
  auto with = tls_client(srv.port(), /*with_client_cert=*/true);
  auto r = with->Get("/health");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200);
}

TEST(TlsServer, BadFilesOrFlagsRefuseToStart) {
  auto start = [](server::ServerOptions o) { server::ApiServer s(o); };
  server::ServerOptions missing = tls_options();
  missing.tls.certfile = kDir + "absent.pem";
  EXPECT_THROW(start(missing), Error);
  server::ServerOptions wrong_key = tls_options();
  wrong_key.tls.keyfile = kDir + "cert.pem";  // a certificate where the key should be
  EXPECT_THROW(start(wrong_key), Error);
  server::ServerOptions no_ca = tls_options();
  no_ca.tls.cert_reqs = 2;  // client certificates required, but nothing to check them against
  EXPECT_THROW(start(no_ca), Error);
  server::ServerOptions key_only;
  key_only.tls.keyfile = kDir + "key.pem";  // a key without a certificate
  EXPECT_THROW(start(key_only), Error);
  server::ServerOptions bad_ciphers = tls_options();
  bad_ciphers.tls.ciphers = "NOT-A-CIPHER";
  EXPECT_THROW(start(bad_ciphers), Error);
}

}  // namespace
}  // namespace vireo::testing
