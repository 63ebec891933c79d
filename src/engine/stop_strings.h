// Stop-string matching over a growing output text.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace vireo {

struct StopMatch {
  size_t pos = 0;      // byte offset of the match in the text
  size_t stop = 0;     // index into the stop list
};

// Earliest match of any stop string that ends at or after `new_from` (bytes before it were
// already checked). Among matches at the same position the longest stop string wins.
std::optional<StopMatch> find_stop_string(const std::string& text, size_t new_from,
                                          const std::vector<std::string>& stops);
// Length of the longest suffix of `text` that is a proper prefix of some stop string: text that
// may still turn into a match and must not be streamed yet.
size_t stop_holdback(const std::string& text, const std::vector<std::string>& stops);

}  // namespace vireo
