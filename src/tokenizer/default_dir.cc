#include "tokenizer/default_dir.h"

#include <filesystem>
#include <system_error>
#include <vector>

namespace vireo {

std::string default_tokenizer_dir() {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<fs::path> candidates;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    candidates.push_back(exe.parent_path() / ".." / "models" / "qwen3");
    candidates.push_back(exe.parent_path() / ".." / ".." / "models" / "qwen3");
  }
  candidates.push_back(fs::path("models") / "qwen3");
  for (auto& c : candidates) {
    if (fs::is_regular_file(c / "tokenizer.json", ec)) return fs::weakly_canonical(c, ec).string();
  }
  return "models/qwen3";
}

}  // namespace vireo
