#include "structured/tokenizer_vocab.h"

#include "tokenizer/tokenizer.h"

namespace vireo::structured {

std::vector<std::string> token_byte_strings(const Tokenizer& tok) {
  static const std::string kMetaspace = "\xE2\x96\x81";  // U+2581
  std::vector<std::string> out(tok.vocab_size());
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    if (tok.is_special(id)) continue;
    const int32_t ids[1] = {id};
    std::string s = tok.decode(ids, false);
    if (s.empty()) continue;
    const std::string piece = tok.id_to_token(id);
    if (piece.rfind(kMetaspace, 0) == 0 && s[0] != ' ') s.insert(s.begin(), ' ');
    out[id] = std::move(s);
  }
  return out;
}

}  // namespace vireo::structured
