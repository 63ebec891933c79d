#include "server/tls_server.h"

#include <httplib.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "core/error.h"
#include "core/openssl_error.h"

namespace vireo::server {
namespace {

// Fills ctx from tls; on failure returns false with *why set.
bool setup_context(SSL_CTX& ctx, const TlsOptions& tls, std::string* why) {
  auto fail = [&](const std::string& what) {
    *why = what + ": " + openssl_error("unknown error");
    return false;
  };
  SSL_CTX_set_min_proto_version(&ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(&ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_SESSION_RESUMPTION_ON_RENEGOTIATION);
  if (SSL_CTX_use_certificate_chain_file(&ctx, tls.certfile.c_str()) != 1)
    return fail("--ssl-certfile " + tls.certfile);
  const std::string& key = tls.keyfile.empty() ? tls.certfile : tls.keyfile;
  if (SSL_CTX_use_PrivateKey_file(&ctx, key.c_str(), SSL_FILETYPE_PEM) != 1) return fail("--ssl-keyfile " + key);
  if (SSL_CTX_check_private_key(&ctx) != 1) return fail("--ssl-keyfile " + key + " does not match the certificate");
  if (!tls.ciphers.empty() && SSL_CTX_set_cipher_list(&ctx, tls.ciphers.c_str()) != 1)
    return fail("--ssl-ciphers " + tls.ciphers);
  if (!tls.ca_certs.empty()) {
    if (SSL_CTX_load_verify_locations(&ctx, tls.ca_certs.c_str(), nullptr) != 1)
      return fail("--ssl-ca-certs " + tls.ca_certs);
    // The CAs' names go in the certificate request, so a client can pick its certificate.
    if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(tls.ca_certs.c_str())) SSL_CTX_set_client_CA_list(&ctx, names);
  }
  int mode = SSL_VERIFY_NONE;
  if (tls.cert_reqs == 1) mode = SSL_VERIFY_PEER;
  if (tls.cert_reqs == 2) mode = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
  SSL_CTX_set_verify(&ctx, mode, nullptr);
  return true;
}

}  // namespace

std::unique_ptr<httplib::Server> make_http_server(const TlsOptions& tls) {
  if (!tls.enabled()) {
    if (!tls.keyfile.empty() || !tls.ca_certs.empty())
      throw Error("--ssl-keyfile / --ssl-ca-certs need --ssl-certfile (the server's certificate)");
    return std::make_unique<httplib::Server>();
  }
  if (tls.cert_reqs < 0 || tls.cert_reqs > 2)
    throw Error("--ssl-cert-reqs " + std::to_string(tls.cert_reqs) + ": expected 0 (none), 1 (optional) or 2 (required)");
  if (tls.cert_reqs > 0 && tls.ca_certs.empty())
    throw Error("--ssl-cert-reqs " + std::to_string(tls.cert_reqs) + " needs --ssl-ca-certs (to check client certificates)");
  std::string why;
  auto svr = std::make_unique<httplib::SSLServer>([&](SSL_CTX& ctx) { return setup_context(ctx, tls, &why); });
  if (!svr->is_valid()) throw Error(why.empty() ? "TLS: the OpenSSL context could not be made" : why);
  return svr;
}

}  // namespace vireo::server
