#include "bench/sharegpt_dataset.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <random>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace vireo::bench {
namespace {

// vLLM's is_valid_sequence with its defaults (min 4 tokens, prompt <= 1,024, prompt + output <= 2,048).
bool valid_sequence(int prompt_len, int output_len, bool skip_output_check) {
  return prompt_len >= 4 && (skip_output_check || output_len >= 4) && prompt_len <= 1024 &&
         prompt_len + output_len <= 2048;
}

// The first two turns' texts, or false when the entry has fewer or they are not strings.
bool first_two_turns(const nlohmann::json& entry, std::string& prompt, std::string& completion) {
  if (!entry.is_object()) return false;
  auto it = entry.find("conversations");
  if (it == entry.end() || !it->is_array() || it->size() < 2) return false;
  const auto& a = (*it)[0];
  const auto& b = (*it)[1];
  if (!a.is_object() || !b.is_object() || !a.contains("value") || !b.contains("value") || !a["value"].is_string() ||
      !b["value"].is_string())
    return false;
  prompt = a["value"].get<std::string>();
  completion = b["value"].get<std::string>();
  return true;
}

}  // namespace

std::vector<SampleRequest> load_sharegpt_dataset(const Tokenizer& tok, const std::string& path,
                                                 const ShareGptDatasetOptions& opt) {
  std::ifstream f(path);
  if (!f) throw Error("cannot open dataset file '" + path + "'");
  nlohmann::json data = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  if (!data.is_array()) throw Error("dataset file '" + path + "': expected a JSON array of ShareGPT conversations");
  std::vector<const nlohmann::json*> entries;
  for (const auto& e : data) entries.push_back(&e);
  if (opt.shuffle) std::shuffle(entries.begin(), entries.end(), std::mt19937_64(opt.seed));
  std::vector<SampleRequest> out;
  std::string prompt, completion;
  for (const nlohmann::json* e : entries) {
    if (static_cast<int>(out.size()) >= opt.num_requests) break;
    if (!first_two_turns(*e, prompt, completion)) continue;
    const int prompt_len = static_cast<int>(tok.encode(prompt, true).size());
    const int output_len = opt.output_len ? *opt.output_len : static_cast<int>(tok.encode(completion, true).size());
    if (!valid_sequence(prompt_len, output_len, opt.output_len.has_value())) continue;
    out.push_back({prompt, prompt_len, output_len});
  }
  if (out.empty()) throw Error("dataset file '" + path + "' has no usable ShareGPT conversations");
  for (size_t i = 0, n = out.size(); static_cast<int>(out.size()) < opt.num_requests; ++i) out.push_back(out[i % n]);
  return out;
}

}  // namespace vireo::bench
