// Feeds a streaming parser every split of a text into one, two and three pieces, to check that
// where the pieces break (a tag cut in two) never changes the result.
#pragma once
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace vireo::testing {

// Calls check(pieces) for every way of cutting `text` at two points i <= j (empty pieces included).
inline void for_each_split(std::string_view text, const std::function<void(const std::vector<std::string_view>&)>& check) {
  for (size_t i = 0; i <= text.size(); ++i)
    for (size_t j = i; j <= text.size(); ++j)
      check({text.substr(0, i), text.substr(i, j - i), text.substr(j)});
}

}  // namespace vireo::testing
