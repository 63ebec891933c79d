#include "tokenizer/byte_level.h"

#include "tokenizer/utf8.h"

namespace vireo {

const ByteLevelMap& ByteLevelMap::get() {
  static const ByteLevelMap map;  // immutable table, built once
  return map;
}

ByteLevelMap::ByteLevelMap() {
  uint32_t n = 0;
  for (uint32_t b = 0; b < 256; ++b) {
    bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    uint32_t cp = printable ? b : 256 + n++;
    utf8::append(byte_to_utf8_[b], cp);
    cp_to_byte_[cp] = static_cast<uint8_t>(b);
  }
}

std::string ByteLevelMap::encode(std::string_view bytes) const {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) out += byte_to_utf8_[c];
  return out;
}

std::string ByteLevelMap::decode(std::string_view text) const {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    size_t st = i;
    uint32_t cp = utf8::next(text, i);
    auto it = cp_to_byte_.find(cp);
    if (it != cp_to_byte_.end()) {
      out.push_back(static_cast<char>(it->second));
    } else {
      out.append(text.substr(st, i - st));
    }
  }
  return out;
}

}  // namespace vireo
