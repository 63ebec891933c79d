#include "server/tag_holdback.h"

#include <algorithm>

namespace vireo::server {

size_t partial_tag_suffix(std::string_view text, std::string_view tag) {
  if (tag.empty()) return 0;
  for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n)
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

}  // namespace vireo::server
