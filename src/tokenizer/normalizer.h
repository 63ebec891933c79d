// tokenizer.json "normalizer": NFC/NFD/NFKC/NFKD, Lowercase, Replace, Prepend, Strip, Sequence.
#pragma once
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace vireo {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(std::string& s) const = 0;  // s: valid UTF-8, edited in place
};

// nullptr for a JSON null. Throws vireo::Error naming `what` for an unknown type.
std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& j, const std::string& what);

// Unicode normalization forms via utf8proc (Debian libutf8proc: small, and exactly NFC/NFD/NFKC/NFKD).
std::string unicode_normalize(const std::string& s, bool compose, bool compat);

}  // namespace vireo
