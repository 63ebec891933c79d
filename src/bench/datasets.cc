#include "bench/datasets.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <set>

#include "core/error.h"
#include "core/log.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace vireo::bench {

namespace {

// vLLM's gen_prompt_decode_to_target_len: decode, re-encode, then truncate or pad with random
// ids and repeat, because N ids do not always decode to a text that encodes back to N ids.
std::string decode_to_target_len(const Tokenizer& tok, std::vector<int32_t> ids, int target,
                                 const std::vector<int32_t>& allowed, std::mt19937_64& rng, int& out_len) {
  std::uniform_int_distribution<size_t> pick(0, allowed.size() - 1);
  std::string prompt;
  for (int attempt = 0;; ++attempt) {
    prompt = tok.decode(ids, /*skip_special_tokens=*/false);
    ids = tok.encode(prompt, /*add_special_tokens=*/false);
    int n = static_cast<int>(ids.size());
    if (n == target || attempt >= 50) {
      out_len = n;
      return prompt;
    }
    if (n < target) {
      while (static_cast<int>(ids.size()) < target) ids.push_back(allowed[pick(rng)]);
    } else {
      ids.resize(static_cast<size_t>(target));
    }
  }
}

// The ids a random prompt may use: neither special nor empty.
std::vector<int32_t> ordinary_ids(const Tokenizer& tok) {
  std::vector<int32_t> allowed;
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    if (!tok.is_special(id) && !tok.id_to_token(id).empty()) allowed.push_back(id);
  }
  if (allowed.empty()) throw Error("random dataset: the tokenizer has no ordinary tokens");
  return allowed;
}

}  // namespace

std::vector<SampleRequest> build_random_dataset(const Tokenizer& tok, const RandomDatasetOptions& opt) {
  if (!(opt.range_ratio >= 0.0 && opt.range_ratio < 1.0))
    throw Error("--random-range-ratio must be in [0, 1)");
  if (opt.num_requests <= 0) throw Error("--num-prompts must be > 0");
  int num_special = static_cast<int>(tok.encode("", /*add_special_tokens=*/true).size());
  int real_input_len = std::max(0, opt.input_len - num_special);
  int in_lo = static_cast<int>(std::floor(real_input_len * (1 - opt.range_ratio)));
  int in_hi = static_cast<int>(std::ceil(real_input_len * (1 + opt.range_ratio)));
  int out_lo = std::max(1, static_cast<int>(std::floor(opt.output_len * (1 - opt.range_ratio))));
  int out_hi = std::max(1, static_cast<int>(std::ceil(opt.output_len * (1 + opt.range_ratio))));
  if (opt.prefix_len + in_lo < 1)
    throw Error("--random-input-len is too small: every prompt needs at least one token");

  const std::vector<int32_t> allowed = ordinary_ids(tok);

  std::mt19937_64 rng(opt.seed);
  std::uniform_int_distribution<int> in_dist(in_lo, in_hi), out_dist(out_lo, out_hi);
  std::uniform_int_distribution<size_t> any(0, allowed.size() - 1);
  std::vector<int> in_lens(opt.num_requests), out_lens(opt.num_requests);
  std::vector<size_t> offsets(opt.num_requests);
  for (int i = 0; i < opt.num_requests; ++i) in_lens[i] = in_dist(rng);
  for (int i = 0; i < opt.num_requests; ++i) out_lens[i] = out_dist(rng);
  for (int i = 0; i < opt.num_requests; ++i) offsets[i] = any(rng);
  std::vector<int32_t> prefix;
  for (int i = 0; i < opt.prefix_len; ++i) prefix.push_back(allowed[any(rng)]);

  std::vector<SampleRequest> out;
  out.reserve(opt.num_requests);
  long long mismatch = 0;
  for (int i = 0; i < opt.num_requests; ++i) {
    std::vector<int32_t> ids = prefix;
    for (int k = 0; k < in_lens[i]; ++k) ids.push_back(allowed[(offsets[i] + i + k) % allowed.size()]);
    int target = opt.prefix_len + in_lens[i];
    int got = 0;
    std::string prompt = decode_to_target_len(tok, std::move(ids), target, allowed, rng, got);
    mismatch += got - target;
    out.push_back({std::move(prompt), got, out_lens[i]});
  }
  if (mismatch != 0)
    log_warn("random dataset: {} tokens {} than requested after decoding and re-encoding", std::llabs(mismatch),
             mismatch > 0 ? "more" : "fewer");
  return out;
}

std::vector<SampleRequest> build_prefix_repetition_dataset(const Tokenizer& tok, const PrefixRepetitionOptions& opt) {
  if (opt.num_requests <= 0) throw Error("--num-prompts must be > 0");
  if (opt.num_prefixes <= 0 || opt.prefix_len < 0 || opt.suffix_len < 0 || opt.prefix_len + opt.suffix_len < 1 ||
      opt.output_len < 1)
    throw Error("--prefix-repetition-*: num-prefixes >= 1, prefix-len + suffix-len >= 1 and output-len >= 1");
  const std::vector<int32_t> allowed = ordinary_ids(tok);
  std::mt19937_64 rng(opt.seed);
  std::uniform_int_distribution<size_t> any(0, allowed.size() - 1);
  // n random ids that decode to a text encoding back to n ids (as vLLM's _generate_exact_length_tokens).
  auto exact = [&](int n) {
    std::vector<int32_t> ids;
    for (int i = 0; i < n; ++i) ids.push_back(allowed[any(rng)]);
    int got = 0;
    const std::string text = decode_to_target_len(tok, std::move(ids), n, allowed, rng, got);
    return n == 0 ? std::vector<int32_t>{} : tok.encode(text, /*add_special_tokens=*/false);
  };
  std::vector<std::vector<int32_t>> prefixes;
  for (int p = 0; p < opt.num_prefixes; ++p) prefixes.push_back(exact(opt.prefix_len));
  std::vector<SampleRequest> out;
  out.reserve(opt.num_requests);
  const int per_prefix = std::max(1, opt.num_requests / opt.num_prefixes);
  for (int i = 0; i < opt.num_requests; ++i) {
    std::vector<int32_t> ids = prefixes[(i / per_prefix) % opt.num_prefixes];
    const std::vector<int32_t> suffix = exact(opt.suffix_len);
    ids.insert(ids.end(), suffix.begin(), suffix.end());
    out.push_back({tok.decode(ids, /*skip_special_tokens=*/false), static_cast<int>(ids.size()), opt.output_len});
  }
  std::shuffle(out.begin(), out.end(), rng);
  return out;
}

std::string format_user_message(const Tokenizer& tok, const std::string& content) {
  const std::string& src = tok.chat_template();
  if (src.empty()) return content;
  ChatTemplate tmpl(src, tok.bos_token().value_or(""), tok.eos_token().value_or(""));
  nlohmann::json messages = nlohmann::json::array({{{"role", "user"}, {"content", content}}});
  return tmpl.apply(messages, ChatTemplateOptions{});
}

std::vector<std::string> read_lines_keep_newline(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot open dataset file '" + path + "'");
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(f, line)) lines.push_back(line + "\n");
  if (!lines.empty() && f.eof()) {
    // getline cannot tell whether the last line had a '\n'; check the file's last byte.
    std::ifstream g(path, std::ios::binary | std::ios::ate);
    auto size = g.tellg();
    if (size > 0) {
      g.seekg(-1, std::ios::end);
      if (g.get() != '\n') lines.back().pop_back();
    }
  }
  if (lines.empty()) throw Error("dataset file '" + path + "' is empty");
  return lines;
}

std::vector<SampleRequest> build_sonnet_dataset(const Tokenizer& tok, const std::vector<std::string>& lines,
                                                const SonnetDatasetOptions& opt) {
  if (lines.empty()) throw Error("sonnet dataset: no lines");
  if (opt.num_requests <= 0) throw Error("--num-prompts must be > 0");
  auto count = [&](const std::string& s) { return static_cast<int>(tok.encode(s, true).size()); };
  double total = 0;
  for (const auto& l : lines) total += count(l);
  double avg_len = total / static_cast<double>(lines.size());

  const std::string base_prompt = "Pick as many lines as you can from these poem lines:\n";
  if (tok.chat_template().empty())
    log_warn("sonnet dataset: the tokenizer has no chat template; prompts are sent unformatted");
  int base_offset = count(format_user_message(tok, base_prompt));
  if (opt.input_len <= base_offset)
    throw Error("--sonnet-input-len must be higher than the base prompt length (" + std::to_string(base_offset) + ")");
  int num_input_lines = static_cast<int>(std::lround((opt.input_len - base_offset) / avg_len));
  int num_prefix_lines = std::max(static_cast<int>(std::lround((opt.prefix_len - base_offset) / avg_len)), 0);
  num_prefix_lines = std::min<int>(num_prefix_lines, static_cast<int>(lines.size()));
  if (num_input_lines < num_prefix_lines)
    throw Error("--sonnet-prefix-len must not exceed --sonnet-input-len");
  std::string prefix = base_prompt;
  for (int i = 0; i < num_prefix_lines; ++i) prefix += lines[i];

  std::mt19937_64 rng(opt.seed);
  std::uniform_int_distribution<size_t> pick(0, lines.size() - 1);
  std::vector<SampleRequest> out;
  int attempts = 0;
  while (static_cast<int>(out.size()) < opt.num_requests) {
    if (++attempts > opt.num_requests * 100 + 1000)
      throw Error("sonnet dataset: cannot build prompts of at most " + std::to_string(opt.input_len) + " tokens");
    std::string prompt = prefix;
    for (int k = 0; k < num_input_lines - num_prefix_lines; ++k) prompt += lines[pick(rng)];
    std::string formatted = format_user_message(tok, prompt);
    int len = count(formatted);
    if (len <= opt.input_len) {
      out.push_back({opt.return_prompt_formatted ? formatted : prompt, len, opt.output_len});
    }
  }
  return out;
}

std::vector<SampleRequest> load_custom_dataset(const Tokenizer& tok, const std::string& path,
                                               const CustomDatasetOptions& opt) {
  std::ifstream f(path);
  if (!f) throw Error("cannot open dataset file '" + path + "'");
  std::vector<SampleRequest> all;  // every line's prompt and output length; counted once chosen
  std::string line;
  int lineno = 0;
  while (std::getline(f, line)) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const std::exception& e) {
      throw Error(path + ":" + std::to_string(lineno) + ": not valid JSON");
    }
    if (!j.is_object() || !j.contains("prompt") || !j["prompt"].is_string())
      throw Error(path + ":" + std::to_string(lineno) + ": needs a string field \"prompt\"");
    SampleRequest r;
    r.prompt = j["prompt"].get<std::string>();
    r.expected_output_len = opt.output_len;
    if (j.contains("output_tokens")) {
      if (!j["output_tokens"].is_number_integer() || j["output_tokens"].get<int>() <= 0)
        throw Error(path + ":" + std::to_string(lineno) + ": \"output_tokens\" must be a positive integer");
      r.expected_output_len = j["output_tokens"].get<int>();
    }
    all.push_back(std::move(r));
  }
  if (all.empty()) throw Error("dataset file '" + path + "' has no prompts");
  if (opt.shuffle) std::shuffle(all.begin(), all.end(), std::mt19937_64(opt.seed));  // vLLM, unless --disable-shuffle
  std::vector<SampleRequest> out;
  for (size_t i = 0; static_cast<int>(out.size()) < opt.num_requests; ++i) {  // oversampled to num_prompts, as vLLM
    SampleRequest r = all[i % all.size()];
    if (i < all.size()) {
      // Sent as is; counted as the server will see it (chat: after its template).
      const std::string counted = opt.count_chat_formatted ? format_user_message(tok, r.prompt) : r.prompt;
      r.prompt_len = static_cast<int>(tok.encode(counted, true).size());
      all[i].prompt_len = r.prompt_len;
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace vireo::bench
