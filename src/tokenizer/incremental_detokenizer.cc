// vLLM's incremental detokenization: decode the window ids[prefix_offset:] and emit what it adds
// beyond ids[prefix_offset:read_offset], unless it ends in U+FFFD (an incomplete character).
#include <algorithm>

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace vireo {

namespace {
constexpr size_t kInitialOffset = 5;  // prompt tokens of context, as vLLM

bool ends_with_replacement(const std::string& s) {
  return s.size() >= utf8::kReplacement.size() &&
         s.compare(s.size() - utf8::kReplacement.size(), utf8::kReplacement.size(), utf8::kReplacement) == 0;
}
}  // namespace

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tok, std::span<const int32_t> prompt_ids,
                                               bool skip_special_tokens)
    : tok_(tok), skip_special_(skip_special_tokens), ids_(prompt_ids.begin(), prompt_ids.end()) {
  prefix_offset_ = ids_.size() > kInitialOffset ? ids_.size() - kInitialOffset : 0;
  read_offset_ = ids_.size();
}

std::string IncrementalDetokenizer::add(int32_t id) {
  ids_.push_back(id);
  std::span<const int32_t> all(ids_);
  std::string prefix_text = tok_.decode(all.subspan(prefix_offset_, read_offset_ - prefix_offset_), skip_special_);
  std::string new_text = tok_.decode(all.subspan(prefix_offset_), skip_special_);
  if (new_text.size() <= prefix_text.size() || ends_with_replacement(new_text)) return "";
  prefix_offset_ = read_offset_;
  read_offset_ = ids_.size();
  return new_text.substr(prefix_text.size());
}

std::string IncrementalDetokenizer::flush() {
  std::span<const int32_t> all(ids_);
  std::string prefix_text = tok_.decode(all.subspan(prefix_offset_, read_offset_ - prefix_offset_), skip_special_);
  std::string new_text = tok_.decode(all.subspan(prefix_offset_), skip_special_);
  prefix_offset_ = read_offset_;
  read_offset_ = ids_.size();
  if (new_text.size() <= prefix_text.size()) return "";
  return new_text.substr(prefix_text.size());
}

}  // namespace vireo
