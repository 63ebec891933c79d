// UTF-8 helpers for the tokenizer: code point iteration, encoding, and lossy repair of byte strings.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace vireo::utf8 {

// Length in bytes of the (valid) UTF-8 sequence starting with lead byte `c`; 1 for invalid leads.
inline size_t seq_len(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) return 2;
  if ((c & 0xF0) == 0xE0) return 3;
  if ((c & 0xF8) == 0xF0) return 4;
  return 1;
}

void append(std::string& out, uint32_t cp);
// Decodes the code point at s[i] of valid UTF-8, advancing i.
uint32_t next(std::string_view s, size_t& i);

// Length of the valid UTF-8 sequence at s[i], or 0 if the bytes there are not one (then
// `*bad_len` gets the length of the maximal invalid subpart, as Unicode / Rust's from_utf8_lossy).
size_t valid_seq_at(std::string_view s, size_t i, size_t* bad_len);

// Rust's String::from_utf8_lossy: each maximal invalid subpart becomes U+FFFD.
std::string lossy(std::string_view bytes);
bool is_valid(std::string_view s);

// U+FFFD as UTF-8.
inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// Rust's char::is_whitespace (Unicode White_Space).
bool is_whitespace(uint32_t cp);

}  // namespace vireo::utf8
