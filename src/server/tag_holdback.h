// Streaming parsers look for tags (<think>, </tool_call>, ...) in text that arrives in pieces; a
// tag can be split across two pieces ("</thi" + "nk>"), so the tail of a piece that could be the
// start of a tag is held back until the next piece (or the end) decides.
#pragma once
#include <cstddef>
#include <string_view>

namespace vireo::server {

// Length of the longest suffix of `text` that is a proper prefix of `tag` (0 if none).
size_t partial_tag_suffix(std::string_view text, std::string_view tag);

}  // namespace vireo::server
