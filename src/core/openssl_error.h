// OpenSSL's oldest queued error as text, for messages (the server's TLS set-up, the benchmark client's sessions).
// Header-only: only the areas that link OpenSSL (server, bench) include it.
#pragma once
#include <openssl/err.h>

#include <string>

namespace vireo {

// The oldest queued error (the queue is then cleared), or `fallback` when none is queued.
inline std::string openssl_error(const char* fallback) {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return fallback;
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

}  // namespace vireo
