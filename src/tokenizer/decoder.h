// tokenizer.json "decoder": ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, Sequence.
// Like tokenizers' decode_chain, each decoder maps the list of token strings to a new list; the
// result is their concatenation.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace vireo {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

// nullptr for a JSON null. Throws vireo::Error naming `what` for an unknown type.
std::unique_ptr<Decoder> make_decoder(const nlohmann::json& j, const std::string& what);

}  // namespace vireo
