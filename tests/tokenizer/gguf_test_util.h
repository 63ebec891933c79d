// Shared by the GGUF tokenizer tests: a test corpus, a models/<name> tokenizer.json edited to spell a GGUF pre's
// pipeline (in a temporary folder, with GGUF files of the same vocabulary beside it), and an encoding check.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../gguf_util/hf_to_gguf.h"
#include "test_util.h"
#include "tokenizer/pre_tokenizer.h"

namespace vireo::test {

// Hand-picked edge cases, then the first 300 lines of the shared tokenizer corpus.
inline std::vector<std::string> gguf_texts() {
  std::vector<std::string> out = {
      "Hello world", "  leading and trailing  ", "tabs\tand\nnewlines\r\n\n\nend", "1234567890 3.14159 -42 1e10",
      "héllo wörld ñandú", "日本語のテキストと中文", "emoji 😀👍🏽 and ZWJ 👨‍👩‍👧", "Cafe\xCC\x81 (e + combining acute)",
      "don't I'll we've THEY'RE", "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
      "<think>\nreasoning\n</think>answer", "<s>[INST] hi <unk> [/INST]</s>", "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>",
      "code: for (int i = 0; i < n; ++i) { x[i] = 0; }", "     \n      \t\t  ", "a", "", "ﬁ ligature Ⅷ ＡＢＣ"};
  std::ifstream f(source_path("tests/fixtures/tokenizer/corpus.jsonl"));
  int n = 0;
  for (std::string line; std::getline(f, line) && n < 300; ++n)
    if (!line.empty()) out.push_back(nlohmann::json::parse(line).get<std::string>());
  return out;
}

// models/<model>'s tokenizer.json changed by `edit` (with its tokenizer_config.json) in a temporary folder, and
// GGUF files of that vocabulary under a given pre-tokenizer beside it: a pre's pipeline against the
// tokenizer.json that spells the same pipeline.
struct EditedTokenizer {
  std::string model;
  std::filesystem::path dir;
  EditedTokenizer(const std::string& model_name, const std::string& tag, const std::function<void(nlohmann::json&)>& edit)
      : model(model_name),
        dir(std::filesystem::path(::testing::TempDir()) / ("vireo_" + tag + "_tok_" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(dir);
    nlohmann::json tj = nlohmann::json::parse(std::ifstream(source_path("models/" + model + "/tokenizer.json")));
    edit(tj);
    std::ofstream(dir / "tokenizer.json") << tj.dump();
    std::filesystem::copy_file(source_path("models/" + model + "/tokenizer_config.json"), dir / "tokenizer_config.json",
                               std::filesystem::copy_options::overwrite_existing);
  }
  ~EditedTokenizer() { std::filesystem::remove_all(dir); }
  std::unique_ptr<Tokenizer> hf() const { return Tokenizer::from_dir(dir.string()); }
  std::unique_ptr<Tokenizer> gguf(const std::string& arch, const std::string& pre) const {
    testing::GgufWriter w;
    w.add_string("general.architecture", arch);
    testing::add_tokenizer_metadata(w, source_path("models/" + model), pre);
    const std::string p = (dir / (pre + ".gguf")).string();
    w.write(p);
    return Tokenizer::from_dir(p);
  }
};

struct EditedQwen3 : EditedTokenizer {
  EditedQwen3(const std::string& tag, const std::function<void(nlohmann::json&)>& edit)
      : EditedTokenizer("qwen3", tag, edit) {}
};

// Fails for each text (the first 10 named) that `got` encodes differently from `want`.
inline void expect_same_encodings(const Tokenizer& got, const Tokenizer& want, const std::vector<std::string>& all) {
  int bad = 0;
  for (const std::string& t : all)
    if (got.encode(t, false) != want.encode(t, false) && bad++ < 10)
      ADD_FAILURE() << "encode differs for " << nlohmann::json(t).dump();
  EXPECT_EQ(bad, 0);
}

// The pieces a pre-tokenizer Sequence ending in ByteLevel makes of `text` before ByteLevel (the last step, which
// only maps bytes to characters). `name`: the GGUF pre it spells (for make_pre_tokenizer's messages).
inline std::vector<std::string> pieces_before_byte_level(nlohmann::json seq, const std::string& name,
                                                         const std::string& text) {
  nlohmann::json& items = seq.at("pretokenizers");
  EXPECT_EQ(items.back().at("type"), "ByteLevel");
  items.erase(items.size() - 1);
  std::vector<PreToken> p = {{text, true}};
  make_pre_tokenizer(seq, name)->apply(p);
  std::vector<std::string> out;
  for (const PreToken& x : p) out.push_back(x.text);
  return out;
}

}  // namespace vireo::test
