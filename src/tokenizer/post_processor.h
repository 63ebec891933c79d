// tokenizer.json "post_processor" for single sequences: TemplateProcessing (e.g. BOS), ByteLevel
// (offsets only: ids unchanged), Bert/Roberta (cls ... sep), Sequence.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace vireo {

class PostProcessor {
 public:
  // Builds the processor; a JSON null gives one that changes nothing.
  PostProcessor(const nlohmann::json& j, const std::string& what);
  // Applies the single-sequence template (only called when add_special_tokens).
  std::vector<int32_t> apply(std::vector<int32_t> ids) const;

 private:
  // The single template: ids to emit, with -1 marking where the sequence goes.
  std::vector<int32_t> template_;
  void append_template(const nlohmann::json& j, const std::string& what);
};

}  // namespace vireo
