#include "tokenizer/spm_merges.h"

#include <algorithm>
#include <cstdint>
#include <unordered_map>

#include "tokenizer/utf8.h"

namespace vireo {

std::vector<std::pair<std::string, std::string>> spm_merges(const std::vector<std::string>& pieces,
                                                            const std::vector<float>& scores) {
  std::unordered_map<std::string_view, int32_t> id;
  for (size_t i = 0; i < pieces.size(); ++i) id.emplace(pieces[i], static_cast<int32_t>(i));
  struct Merge {
    int32_t left, right;
    float score;
  };
  std::vector<Merge> merges;
  std::vector<Merge> local;
  for (size_t p = 0; p < pieces.size(); ++p) {
    const std::string_view s = pieces[p];
    local.clear();
    if (s.empty()) continue;
    // Split at code point boundaries (Python string indices).
    for (size_t i = utf8::seq_len(static_cast<unsigned char>(s[0])); i < s.size();
         i += utf8::seq_len(static_cast<unsigned char>(s[i]))) {
      auto l = id.find(s.substr(0, i)), r = id.find(s.substr(i));
      if (l != id.end() && r != id.end()) local.push_back({l->second, r->second, scores[p]});
    }
    std::sort(local.begin(), local.end(),
              [](const Merge& a, const Merge& b) { return a.left != b.left ? a.left < b.left : a.right < b.right; });
    merges.insert(merges.end(), local.begin(), local.end());
  }
  // Stable: equal scores keep piece order, then (left id, right id), as the extractor's sorts do.
  std::stable_sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) { return a.score > b.score; });
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(merges.size());
  for (const auto& m : merges) out.emplace_back(pieces[m.left], pieces[m.right]);
  return out;
}

}  // namespace vireo
