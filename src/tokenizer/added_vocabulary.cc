#include "tokenizer/added_vocabulary.h"

#include <algorithm>

#include "tokenizer/normalizer.h"
#include "tokenizer/utf8.h"

namespace vireo {

void AddedVocabulary::add(AddedToken t) {
  max_id_ = std::max(max_id_, t.id);
  by_content_[t.content] = t.id;
  by_id_[t.id] = tokens_.size();
  tokens_.push_back(std::move(t));
}

void AddedVocabulary::build(const Normalizer* normalizer) {
  for (auto& trie : tries_) {
    trie.nodes.assign(1, {});
    std::fill(std::begin(trie.first_byte), std::end(trie.first_byte), false);
  }
  for (size_t k = 0; k < tokens_.size(); ++k) {
    const auto& t = tokens_[k];
    std::string content = t.content;
    if (t.normalized && normalizer) normalizer->normalize(content);
    if (content.empty()) continue;
    Trie& trie = tries_[t.normalized ? 1 : 0];
    int32_t n = 0;
    for (unsigned char c : content) {
      auto it = trie.nodes[static_cast<size_t>(n)].next.find(c);
      if (it == trie.nodes[static_cast<size_t>(n)].next.end()) {
        trie.nodes.push_back({});
        int32_t nn = static_cast<int32_t>(trie.nodes.size()) - 1;
        trie.nodes[static_cast<size_t>(n)].next[c] = nn;
        n = nn;
      } else {
        n = it->second;
      }
    }
    trie.nodes[static_cast<size_t>(n)].token = static_cast<int32_t>(k);
    trie.first_byte[static_cast<unsigned char>(content[0])] = true;
  }
}

const AddedToken* AddedVocabulary::by_id(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

void AddedVocabulary::mark_special(std::string_view content) {
  auto it = by_content_.find(std::string(content));
  if (it != by_content_.end()) tokens_[by_id_.at(it->second)].special = true;
}

std::optional<int32_t> AddedVocabulary::by_content(std::string_view content) const {
  auto it = by_content_.find(std::string(content));
  if (it == by_content_.end()) return std::nullopt;
  return it->second;
}

namespace {

bool is_word_char(uint32_t cp) {
  // Rust regex \w: alphanumeric or underscore (approximated with ASCII + any non-ASCII letter-ish).
  if (cp < 0x80) return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
  return !utf8::is_whitespace(cp);
}

uint32_t last_cp(std::string_view s) {
  size_t st = s.size() - 1;
  while (st > 0 && (static_cast<unsigned char>(s[st]) & 0xC0) == 0x80) --st;
  return utf8::next(s, st);
}

}  // namespace

std::vector<TextSplit> AddedVocabulary::split(std::string_view text, bool normalized) const {
  const Trie& trie = tries_[normalized ? 1 : 0];
  std::vector<TextSplit> out;
  size_t start_offset = 0;
  size_t i = 0;
  while (i < text.size()) {
    if (trie.nodes.size() <= 1 || !trie.first_byte[static_cast<unsigned char>(text[i])]) {
      ++i;
      continue;
    }
    // Longest token starting at i.
    int32_t n = 0, best = -1;
    size_t best_end = 0;
    for (size_t k = i; k < text.size(); ++k) {
      const auto& nx = trie.nodes[static_cast<size_t>(n)].next;
      auto it = nx.find(static_cast<unsigned char>(text[k]));
      if (it == nx.end()) break;
      n = it->second;
      if (trie.nodes[static_cast<size_t>(n)].token >= 0) {
        best = trie.nodes[static_cast<size_t>(n)].token;
        best_end = k + 1;
      }
    }
    if (best < 0) {
      ++i;
      continue;
    }
    const AddedToken& t = tokens_[static_cast<size_t>(best)];
    size_t start = i, stop = best_end;
    if (t.single_word) {
      bool start_ok = start == 0 || !is_word_char(last_cp(text.substr(0, start)));
      size_t j = stop;
      bool stop_ok = stop == text.size() || !is_word_char(utf8::next(text, j));
      if (!start_ok || !stop_ok) {  // like the Aho-Corasick iterator, a rejected match is consumed
        i = best_end;
        continue;
      }
    }
    if (t.lstrip) {
      size_t ns = start;
      while (ns > 0) {
        size_t st = ns - 1;
        while (st > 0 && (static_cast<unsigned char>(text[st]) & 0xC0) == 0x80) --st;
        size_t j = st;
        if (!utf8::is_whitespace(utf8::next(text, j))) break;
        ns = st;
      }
      start = std::max(ns, start_offset);
    }
    if (t.rstrip) {
      while (stop < text.size()) {
        size_t j = stop;
        if (!utf8::is_whitespace(utf8::next(text, j))) break;
        stop = j;
      }
    }
    if (start_offset < start) out.push_back({start_offset, start, -1});
    out.push_back({start, stop, t.id});
    start_offset = stop;
    i = std::max(stop, i + 1);
  }
  if (start_offset < text.size()) out.push_back({start_offset, text.size(), -1});
  return out;
}

}  // namespace vireo
