// GPT-2's byte <-> unicode map (tokenizers' ByteLevel): every byte gets a printable code point.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

namespace vireo {

class ByteLevelMap {
 public:
  static const ByteLevelMap& get();
  // Each byte of `bytes` as its mapped code point, UTF-8 encoded.
  std::string encode(std::string_view bytes) const;
  // Inverse: mapped code points back to bytes; other characters pass through as their UTF-8.
  std::string decode(std::string_view text) const;

 private:
  ByteLevelMap();
  std::array<std::string, 256> byte_to_utf8_;
  std::unordered_map<uint32_t, uint8_t> cp_to_byte_;
};

}  // namespace vireo
