#include "server/bad_words.h"

#include <fmt/format.h>

#include "server/openai_errors.h"

namespace vireo::server {

std::vector<std::string> parse_bad_words(const Json& body) {
  std::vector<std::string> words;
  auto it = body.find("bad_words");
  if (it == body.end() || it->is_null()) return words;
  if (!it->is_array()) throw bad_request("'bad_words' must be a list of strings", "bad_words");
  for (const Json& w : *it) {
    if (!w.is_string()) throw bad_request("'bad_words' must be a list of strings", "bad_words");
    words.push_back(w.get<std::string>());
  }
  return words;
}

std::vector<std::vector<int32_t>> tokenize_bad_words(const std::vector<std::string>& words, const Tokenizer& tok,
                                                     int32_t vocab_size) {
  std::vector<std::vector<int32_t>> out;
  for (const std::string& word : words) {
    const size_t start = word.find_first_not_of(" \t\n\r\f\v");
    const std::string stripped = start == std::string::npos ? std::string() : word.substr(start);
    std::vector<int32_t> plain = tok.encode(stripped, false);
    std::vector<int32_t> spaced = tok.encode(" " + stripped, false);
    if (plain.empty()) continue;
    const bool keep_spaced = spaced.size() == plain.size() && spaced.front() != plain.front();
    out.push_back(std::move(plain));
    if (keep_spaced) out.push_back(std::move(spaced));
  }
  for (const auto& ids : out)
    for (int32_t id : ids)
      if (id < 0 || id >= vocab_size)
        throw bad_request(fmt::format("The model vocabulary size is {}, but the following tokens were specified as bad: {}",
                                      vocab_size, id),
                          "bad_words");
  return out;
}

}  // namespace vireo::server
