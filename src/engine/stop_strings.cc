#include "engine/stop_strings.h"

#include <algorithm>

namespace vireo {

std::optional<StopMatch> find_stop_string(const std::string& text, size_t new_from,
                                          const std::vector<std::string>& stops) {
  std::optional<StopMatch> best;
  for (size_t s = 0; s < stops.size(); ++s) {
    const std::string& stop = stops[s];
    if (stop.empty()) continue;
    // A match ending at or after new_from starts at or after new_from - (len - 1).
    size_t from = new_from + 1 >= stop.size() ? new_from + 1 - stop.size() : 0;
    size_t pos = text.find(stop, from);
    if (pos == std::string::npos) continue;
    if (!best || pos < best->pos || (pos == best->pos && stop.size() > stops[best->stop].size()))
      best = StopMatch{pos, s};
  }
  return best;
}

size_t stop_holdback(const std::string& text, const std::vector<std::string>& stops) {
  size_t hold = 0;
  for (const std::string& stop : stops) {
    size_t max_len = std::min(text.size(), stop.empty() ? 0 : stop.size() - 1);
    for (size_t len = max_len; len > hold; --len) {
      if (text.compare(text.size() - len, len, stop, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  return hold;
}

}  // namespace vireo
