#include "tokenizer/bpe_model.h"

#include <mutex>
#include <queue>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace vireo {

namespace {
constexpr size_t kCacheCapacity = 1 << 18;  // words; the cache is cleared when it fills
constexpr size_t kMaxCachedWordBytes = 256;

std::string opt_string(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? std::string() : it->get<std::string>();
}
}  // namespace

BpeModel::BpeModel(const nlohmann::json& j, const std::string& what, VocabList* vocab_in, MergeList* merges_in) {
  std::string type = j.value("type", "BPE");
  if (type != "BPE") throw Error(what + ": unsupported model type '" + type + "' (only BPE)");
  VocabList vocab_local;
  MergeList merges_local;
  if (!vocab_in) {
    if (!j.contains("vocab") || !j.at("vocab").is_object()) throw Error(what + ": model.vocab missing");
    for (auto it = j.at("vocab").begin(); it != j.at("vocab").end(); ++it)
      vocab_local.emplace_back(it.key(), it.value().get<int32_t>());
    vocab_in = &vocab_local;
  }
  if (!merges_in) {
    if (!j.contains("merges") || !j.at("merges").is_array()) throw Error(what + ": model.merges missing");
    for (const auto& m : j.at("merges")) {
      if (m.is_string()) {  // "a b"
        const auto& s = m.get_ref<const std::string&>();
        size_t sp = s.find(' ');
        if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
          throw Error(what + ": bad merge '" + s + "'");
        merges_local.emplace_back(s.substr(0, sp), s.substr(sp + 1));
      } else if (m.is_array() && m.size() == 2) {  // ["a", "b"]
        merges_local.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
      } else {
        throw Error(what + ": bad merge entry " + m.dump());
      }
    }
    merges_in = &merges_local;
  }
  if (vocab_in->empty()) throw Error(what + ": model.vocab is empty");

  vocab_.reserve(vocab_in->size());
  int32_t max_id = -1;
  for (auto& [tok, id] : *vocab_in) max_id = std::max(max_id, id);
  id_to_token_.resize(static_cast<size_t>(max_id + 1));
  for (auto& [tok, id] : *vocab_in) {
    if (id < 0) throw Error(what + ": negative id for token '" + tok + "'");
    id_to_token_[static_cast<size_t>(id)] = tok;
    vocab_.emplace(std::move(tok), id);
  }

  continuing_prefix_ = opt_string(j, "continuing_subword_prefix");
  end_suffix_ = opt_string(j, "end_of_word_suffix");
  fuse_unk_ = j.value("fuse_unk", false);
  byte_fallback_ = j.value("byte_fallback", false);
  ignore_merges_ = j.value("ignore_merges", false);
  std::string unk = opt_string(j, "unk_token");
  if (!unk.empty()) {
    if (auto id = token_to_id(unk)) unk_id_ = *id;
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    auto id = token_to_id(name);
    byte_ids_[b] = id ? *id : -1;
  }

  merges_.reserve(merges_in->size());
  int32_t rank = 0;
  std::string merged;
  for (const auto& [a, b] : *merges_in) {
    auto ia = token_to_id(a), ib = token_to_id(b);
    merged.assign(a);
    merged.append(b, std::min(continuing_prefix_.size(), b.size()));
    auto im = token_to_id(merged);
    if (!ia || !ib || !im) throw Error(what + ": merge '" + a + " " + b + "' uses a token not in the vocab");
    merges_.emplace(pair_key(*ia, *ib), MergeValue{rank++, *im});
  }
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size()) return nullptr;
  const std::string& s = id_to_token_[static_cast<size_t>(id)];
  if (s.empty() && !vocab_.count(s)) return nullptr;  // a hole in the id space
  return &s;
}

void BpeModel::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (auto id = token_to_id(word)) {
      out.push_back(*id);
      return;
    }
  }
  bool cacheable = word.size() <= kMaxCachedWordBytes;
  if (cacheable) {
    std::shared_lock lock(cache_mu_);
    auto it = cache_.find(word);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> ids;
  tokenize_uncached(word, ids);
  out.insert(out.end(), ids.begin(), ids.end());
  if (cacheable) {
    std::unique_lock lock(cache_mu_);
    if (cache_.size() >= kCacheCapacity) cache_.clear();
    cache_.emplace(std::string(word), std::move(ids));
  }
}

void BpeModel::tokenize_uncached(std::string_view w, std::vector<int32_t>& out) const {
  // Symbols form a doubly linked list over the word; merges are applied lowest rank first
  // (ties: leftmost) from a priority queue, so a word of n symbols costs O(n log n).
  struct Symbol {
    int32_t id;
    int prev, next;
    bool alive;
  };
  std::vector<Symbol> sym;
  sym.reserve(w.size());
  auto add = [&](int32_t id) {
    int i = static_cast<int>(sym.size());
    sym.push_back({id, i - 1, i + 1, true});
  };
  int32_t pending_unk = -1;  // fuse_unk: consecutive unknown chars become one <unk>
  std::string s;
  for (size_t i = 0; i < w.size();) {
    size_t st = i;
    size_t n = utf8::seq_len(static_cast<unsigned char>(w[i]));
    i = std::min(w.size(), i + n);
    bool first = st == 0, last = i >= w.size();
    s.assign(w.substr(st, i - st));
    if (!first && !continuing_prefix_.empty()) s.insert(0, continuing_prefix_);
    if (last && !end_suffix_.empty()) s += end_suffix_;
    if (auto id = token_to_id(s)) {
      if (pending_unk >= 0) {
        add(pending_unk);
        pending_unk = -1;
      }
      add(*id);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (unsigned char c : s) all &= byte_ids_[c] >= 0;
      if (all) {
        for (unsigned char c : s) add(byte_ids_[c]);
        continue;
      }
    }
    if (unk_id_) {
      if (pending_unk >= 0 && !fuse_unk_) add(pending_unk);
      pending_unk = *unk_id_;
    }
  }
  if (pending_unk >= 0) add(pending_unk);
  if (sym.empty()) return;
  sym.back().next = -1;

  struct Cand {
    int32_t rank;
    int pos;
    int32_t new_id;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> q;
  auto push_pair = [&](int pos) {
    int nx = sym[static_cast<size_t>(pos)].next;
    if (nx < 0) return;
    auto it = merges_.find(pair_key(sym[static_cast<size_t>(pos)].id, sym[static_cast<size_t>(nx)].id));
    if (it != merges_.end()) q.push({it->second.rank, pos, it->second.new_id});
  };
  for (int i = 0; i + 1 < static_cast<int>(sym.size()); ++i) push_pair(i);
  while (!q.empty()) {
    Cand c = q.top();
    q.pop();
    Symbol& left = sym[static_cast<size_t>(c.pos)];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = sym[static_cast<size_t>(left.next)];
    auto it = merges_.find(pair_key(left.id, right.id));
    if (it == merges_.end() || it->second.new_id != c.new_id) continue;  // stale entry
    left.id = c.new_id;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) sym[static_cast<size_t>(right.next)].prev = c.pos;
    if (left.prev >= 0) push_pair(left.prev);
    push_pair(c.pos);
  }
  for (int i = 0; i >= 0; i = sym[static_cast<size_t>(i)].next) out.push_back(sym[static_cast<size_t>(i)].id);
}

}  // namespace vireo
