// Prompt sets for `bench serve`, built like vLLM's benchmark datasets (vllm/benchmarks/datasets):
//  random: prompt token lengths drawn around --random-input-len, a shared random prefix, ids
//          decoded and re-encoded until the text encodes to exactly the drawn length;
//  sonnet: "Pick as many lines as you can from these poem lines:\n" + a fixed prefix of the poem's
//          first lines + random lines, formatted with the chat template, kept when <= input_len;
//  custom: JSONL, one {"prompt": ..., "output_tokens": N?} per line;
//  prefix_repetition: a few random prefixes, each shared by many prompts with their own random suffixes
//          (prefix caching under load).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace vireo {
class Tokenizer;
}

namespace vireo::bench {

struct SampleRequest {
  std::string prompt;           // what is sent (completions: the text; chat: the user message)
  int prompt_len = 0;           // tokens the server will see
  int expected_output_len = 0;  // max_tokens
};

struct RandomDatasetOptions {
  int num_requests = 1000;
  int input_len = 1024;
  int output_len = 128;
  double range_ratio = 0.0;  // [0, 1)
  int prefix_len = 0;
  uint64_t seed = 0;
};
std::vector<SampleRequest> build_random_dataset(const Tokenizer& tok, const RandomDatasetOptions& opt);

// vLLM's prefix_repetition: num_prefixes random prefixes of prefix_len tokens, each followed by its own
// random suffix of suffix_len tokens in num_requests / num_prefixes prompts (the remainder of the division
// takes the first prefixes again, where vLLM sends fewer requests), shuffled.
struct PrefixRepetitionOptions {
  int num_requests = 1000;
  int prefix_len = 256, suffix_len = 256, num_prefixes = 10, output_len = 128;
  uint64_t seed = 0;
};
std::vector<SampleRequest> build_prefix_repetition_dataset(const Tokenizer& tok, const PrefixRepetitionOptions& opt);

struct SonnetDatasetOptions {
  int num_requests = 1000;
  int input_len = 550;
  int output_len = 150;
  int prefix_len = 200;
  uint64_t seed = 0;
  // openai (completions) sends the chat-formatted text; openai-chat sends the raw text and lets
  // the server apply the template (vLLM's return_prompt_formatted = backend != "openai-chat").
  bool return_prompt_formatted = true;
};
// `lines`: the poem's lines, each ending in '\n' (as Python's readlines()).
std::vector<SampleRequest> build_sonnet_dataset(const Tokenizer& tok, const std::vector<std::string>& lines,
                                                const SonnetDatasetOptions& opt);
std::vector<std::string> read_lines_keep_newline(const std::string& path);
// The chat-formatted single user message (tokenizer's chat template, add_generation_prompt);
// the raw text when the tokenizer has no template.
std::string format_user_message(const Tokenizer& tok, const std::string& content);

struct CustomDatasetOptions {
  int num_requests = 1000;
  int output_len = 256;  // when a line has no "output_tokens"
  bool count_chat_formatted = false;  // openai-chat: count tokens after the chat template
  bool shuffle = true;  // vLLM shuffles the lines (seeded) unless --disable-shuffle
  uint64_t seed = 0;
};
std::vector<SampleRequest> load_custom_dataset(const Tokenizer& tok, const std::string& jsonl_path,
                                               const CustomDatasetOptions& opt);

}  // namespace vireo::bench
