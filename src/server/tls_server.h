// HTTPS as `vllm serve --ssl-certfile ... --ssl-keyfile ...` (uvicorn's TLS): the listener is cpp-httplib's
// SSLServer over an OpenSSL context set up here, else its plain Server.
#pragma once
#include <memory>
#include <string>

namespace httplib {
class Server;
}

namespace vireo::server {

// vLLM's --ssl-certfile / --ssl-keyfile / --ssl-ca-certs / --ssl-cert-reqs / --ssl-ciphers.
struct TlsOptions {
  std::string certfile;  // PEM certificate chain; empty: plain HTTP
  std::string keyfile;   // PEM private key; empty: the key is in certfile (as Python's ssl module allows)
  std::string ca_certs;  // PEM CA certificates that client certificates are checked against
  // Python's ssl.VerifyMode, as uvicorn takes it: 0 CERT_NONE (no client certificate asked for), 1 CERT_OPTIONAL
  // (checked when sent), 2 CERT_REQUIRED (a connection without a valid one is refused).
  int cert_reqs = 0;
  std::string ciphers;  // OpenSSL cipher list for TLS 1.2 (TLS 1.3's suites are OpenSSL's defaults)
  bool enabled() const { return !certfile.empty(); }
};

// Throws vireo::Error with OpenSSL's reason when the certificate, key or CA file cannot be used.
std::unique_ptr<httplib::Server> make_http_server(const TlsOptions& tls);

}  // namespace vireo::server
