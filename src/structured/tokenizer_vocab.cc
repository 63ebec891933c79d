#include "structured/tokenizer_vocab.h"

#include "tokenizer/tokenizer.h"

namespace vireo::structured {
namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// "<0xHH>": a SentencePiece byte-fallback piece (-1 otherwise).
int byte_fallback(const std::string& piece) {
  if (piece.size() != 6 || piece.compare(0, 3, "<0x") != 0 || piece[5] != '>') return -1;
  const int hi = hex_digit(piece[3]), lo = hex_digit(piece[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

}  // namespace

std::vector<std::string> token_byte_strings(const Tokenizer& tok) {
  static const std::string kMetaspace = "\xE2\x96\x81";  // U+2581
  std::vector<std::string> out(tok.vocab_size());
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    if (tok.is_special(id)) continue;
    const int32_t ids[1] = {id};
    std::string s = tok.decode(ids, false);
    if (s.empty()) continue;
    const std::string piece = tok.id_to_token(id);
    // A lone byte-fallback piece decodes to U+FFFD when the byte is not a whole character; the
    // grammar needs the byte itself (it joins the next pieces into one character).
    if (const int b = byte_fallback(piece); b >= 0 && s != piece) {
      out[id] = std::string(1, static_cast<char>(b));
      continue;
    }
    if (piece.rfind(kMetaspace, 0) == 0 && s[0] != ' ') s.insert(s.begin(), ' ');
    out[id] = std::move(s);
  }
  return out;
}

}  // namespace vireo::structured
