#include "bench/tokenizer_dir.h"

#include <unistd.h>

#include <filesystem>
#include <vector>

#include "core/error.h"
#include "tokenizer/default_dir.h"
#include "tokenizer/gguf_tokenizer.h"

namespace vireo::bench {

using vireo::default_tokenizer_dir;
namespace fs = std::filesystem;

namespace {

// The working directory, then the binary's folder and its parents (build/ sits in the repo).
std::vector<fs::path> search_roots() {
  std::vector<fs::path> roots{fs::current_path()};
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n > 0) {
    fs::path p = fs::path(std::string(buf, static_cast<size_t>(n))).parent_path();
    for (int i = 0; i < 3 && !p.empty(); ++i, p = p.parent_path()) roots.push_back(p);
  }
  return roots;
}

std::string find_under_roots(const fs::path& rel) {
  for (const auto& root : search_roots()) {
    std::error_code ec;
    if (fs::exists(root / rel, ec)) return (root / rel).string();
  }
  return "";
}

}  // namespace

std::string resolve_tokenizer_dir(const std::string& tokenizer_flag, const std::string& model_flag) {
  if (!tokenizer_flag.empty()) {
    if (!fs::exists(fs::path(tokenizer_flag) / "tokenizer.json") && !is_gguf_tokenizer_path(tokenizer_flag))
      throw Error("--tokenizer: no tokenizer.json in '" + tokenizer_flag + "'");
    return tokenizer_flag;
  }
  std::error_code ec;
  if (!model_flag.empty() && fs::exists(fs::path(model_flag) / "tokenizer.json", ec)) return model_flag;
  if (!model_flag.empty() && is_gguf_tokenizer_path(model_flag)) return model_flag;  // its tokenizer.ggml.* metadata
  std::string def = default_tokenizer_dir();
  if (fs::exists(fs::path(def) / "tokenizer.json", ec)) return def;
  std::string dir = find_under_roots("models/qwen3/tokenizer.json");
  if (dir.empty())
    throw Error("no tokenizer: pass --tokenizer DIR (a folder with tokenizer.json), or run scripts/setup.sh for models/qwen3");
  return fs::path(dir).parent_path().string();
}

std::string default_sonnet_path() {
  std::string p = find_under_roots("benchmarks/data/sonnet.txt");
  if (p.empty()) throw Error("benchmarks/data/sonnet.txt not found: pass --dataset-path");
  return p;
}

}  // namespace vireo::bench
