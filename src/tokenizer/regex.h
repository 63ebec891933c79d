// A compiled PCRE2 regex (UTF + UCP, JIT) that behaves like the Oniguruma patterns of tokenizer.json.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace vireo {

class Regex {
 public:
  // `what` names the pattern's origin for error messages (e.g. "models/x/tokenizer.json").
  Regex(const std::string& pattern, const std::string& what);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Non-overlapping matches, left to right, as byte ranges [start, end) of `text` (valid UTF-8).
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;

  // Oniguruma's \s is Unicode White_Space (it includes U+0085); PCRE2's UCP \s does not, so
  // \s / \S are rewritten to explicit classes. Exposed for tests.
  static std::string translate(const std::string& pattern);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The pattern object of Replace/Split in tokenizer.json: {"String": "..."} sets `literal`,
// {"Regex": "..."} sets `re`.
void read_pattern(const nlohmann::json& p, const std::string& what, std::string& literal, std::unique_ptr<Regex>& re);

}  // namespace vireo
