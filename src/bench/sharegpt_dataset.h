// ShareGPT prompts for `bench serve --dataset-name sharegpt` (vLLM's ShareGPTDataset): a JSON array of
// {"conversations": [{"from": "human", "value": ...}, {"from": "gpt", "value": ...}, ...]}; each entry with
// two turns or more gives its first turn as the prompt and, unless an output length is forced, the token
// count of its second as max_tokens. Entries are shuffled by the seed (our generator: the order differs
// from Python's random.shuffle), and kept as vLLM's is_valid_sequence keeps them: prompt and output of 4
// tokens or more (the output check skipped when forced), prompt <= 1,024 and prompt + output <= 2,048.
// Fewer entries than asked are repeated (vLLM's oversampling).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench/datasets.h"

namespace vireo::bench {

struct ShareGptDatasetOptions {
  int num_requests = 1000;
  std::optional<int> output_len;  // --sharegpt-output-len
  uint64_t seed = 0;
  bool shuffle = true;  // false: the file's order (--disable-shuffle)
};
std::vector<SampleRequest> load_sharegpt_dataset(const Tokenizer& tok, const std::string& json_path,
                                                 const ShareGptDatasetOptions& opt);

}  // namespace vireo::bench
