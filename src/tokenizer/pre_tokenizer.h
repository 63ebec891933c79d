// tokenizer.json "pre_tokenizer": Split, ByteLevel, Metaspace, Sequence, and the fixed splitters Digits,
// Whitespace, WhitespaceSplit, Punctuation, CharDelimiterSplit, BertPreTokenizer (each a Split of a pattern).
// Each refines the list of pieces (pre-token words) that the BPE model then tokenizes one by one.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace vireo {

struct PreToken {
  std::string text;
  bool at_start = false;  // begins at offset 0 of the whole input (Metaspace prepend_scheme "first")
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces `pieces` by their refinement; empty pieces are dropped.
  virtual void apply(std::vector<PreToken>& pieces) const = 0;
};

// nullptr for a JSON null. Throws vireo::Error naming `what` for an unknown type.
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& j, const std::string& what);

// Metaspace as transformers 5's LlamaTokenizer installs it (replacement U+2581).
std::unique_ptr<PreTokenizer> make_metaspace(const std::string& replacement, const std::string& prepend_scheme,
                                             bool split);

}  // namespace vireo
