#include "engine/ngram_proposer.h"

#include <algorithm>

namespace vireo {

std::vector<int32_t> propose_ngram(std::span<const int32_t> tokens, int min_n, int max_n, int k) {
  const int len = static_cast<int>(tokens.size());
  if (k <= 0 || min_n < 1 || max_n < min_n || len <= min_n) return {};
  // One backward scan over the places e where an earlier copy of the suffix could end (e < len - 1):
  // the match length there is how many tokens before e + 1 equal the suffix's, up to max_n. The longest
  // match wins; among equals, the most recent one followed by k tokens (a copy overlapping the suffix, as
  // in a loop, has fewer: then the one followed by most). A full-length match with k tokens ends the scan.
  const int32_t last = tokens[len - 1];
  int best_len = 0, best_end = -1, best_avail = 0;
  for (int e = len - 2; e >= 0; --e) {
    if (tokens[e] != last) continue;
    int m = 1;
    while (m < max_n && e - m >= 0 && tokens[e - m] == tokens[len - 1 - m]) ++m;
    const int avail = std::min(k, len - 1 - e);
    if (m > best_len || (m == best_len && avail > best_avail)) {
      best_len = m, best_end = e, best_avail = avail;
      if (m == max_n && avail == k) break;
    }
  }
  if (best_len < min_n) return {};
  const int from = best_end + 1, to = std::min(len, from + k);
  return std::vector<int32_t>(tokens.begin() + from, tokens.begin() + to);
}

}  // namespace vireo
