#include "structured/grammar_stack.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace vireo::structured {
namespace {

// Configurations (position, return node) one expand/advance may visit. Each is visited once per call,
// so real grammars stay far below (a JSON state visits tens, a large anyOf thousands); beyond it the
// request fails rather than the engine thread spending seconds on one byte.
constexpr size_t kMaxExpandWork = 200000;

uint64_t mix(uint64_t k) { return (k * 0x9E3779B97F4A7C15ull) >> 20; }

}  // namespace

void PairTable::new_stamp() {
  count_ = 0;
  if (++stamp_ == 0) {  // wrapped: no slot may look used
    std::fill(stamps_.begin(), stamps_.end(), 0u);
    stamp_ = 1;
  }
}

int32_t& PairTable::find_or_insert(uint64_t k, int32_t fresh, bool& inserted) {
  if ((count_ + 1) * 2 > stamps_.size()) grow();
  const size_t m = stamps_.size() - 1;
  for (size_t h = mix(k) & m;; h = (h + 1) & m) {
    if (stamps_[h] != stamp_) {
      stamps_[h] = stamp_;
      keys_[h] = k;
      values_[h] = fresh;
      ++count_;
      inserted = true;
      return values_[h];
    }
    if (keys_[h] == k) {
      inserted = false;
      return values_[h];
    }
  }
}

void PairTable::grow() {
  std::vector<uint64_t> keys = std::move(keys_);
  std::vector<int32_t> values = std::move(values_);
  std::vector<uint32_t> stamps = std::move(stamps_);
  const size_t n = std::max<size_t>(64, stamps.size() * 2);
  keys_.assign(n, 0);
  values_.assign(n, 0);
  stamps_.assign(n, 0);
  const uint32_t old = stamp_;
  stamp_ = 1;
  count_ = 0;
  bool inserted = false;
  for (size_t i = 0; i < stamps.size(); ++i)
    if (stamps[i] == old) find_or_insert(keys[i], values[i], inserted);
}

int32_t GrammarStack::push(int32_t pos, int32_t parent) {
  const StackNode n{pos, parent};
  const int32_t fresh = static_cast<int32_t>(nodes_.size());
  bool inserted = false;
  int32_t& id = interned_.find_or_insert(PairTable::key(pos, parent), fresh, inserted);
  if (!inserted && id < fresh && nodes_[id] == n) return id;
  id = fresh;  // new, or the entry's node was rolled back
  nodes_.push_back(n);
  return fresh;
}

void GrammarStack::begin_call(const std::vector<StackTop>& out) {
  seen_.new_stamp();
  out_base_ = out.size();
}

void GrammarStack::expand(int32_t pos, int32_t parent, std::vector<StackTop>& out, ExpandFlags& flags) {
  begin_call(out);
  expand_at(pos, parent, out, flags, 0);
}

void GrammarStack::expand_rule(int32_t rule, int32_t parent, std::vector<StackTop>& out, ExpandFlags& flags) {
  begin_call(out);
  expand_alts(rule, parent, out, flags, 0);
}

void GrammarStack::expand_alts(int32_t rule, int32_t ret, std::vector<StackTop>& out, ExpandFlags& flags, int depth) {
  if (depth > kMaxExpandDepth)
    throw Error("structured output: grammar rule '" + g_.rule_names[rule] + "' is left-recursive or nested more than " +
                std::to_string(kMaxExpandDepth) + " rules deep without consuming a byte");
  for (int32_t start : g_.rule_alts[rule]) expand_at(start, ret, out, flags, depth + 1);
}

void GrammarStack::expand_at(int32_t pos, int32_t parent, std::vector<StackTop>& out, ExpandFlags& flags, int depth) {
  const std::vector<GrammarElement>& el = g_.elements;
  while (true) {
    // Each configuration once per call: nullable sub-rules otherwise reach the same one by
    // exponentially many paths (e.g. the regex ((((a){0,3}){0,3}){0,3}){0,3}).
    bool fresh = false;
    seen_.find_or_insert(PairTable::key(pos, parent), 0, fresh);
    if (!fresh) return;
    if (budget_-- == 0)
      throw Error("structured output: the grammar needs too much work for one token mask (it is too ambiguous)");
    if (seen_.size() > kMaxExpandWork)
      throw Error("structured output: the grammar is too ambiguous (more than " + std::to_string(kMaxExpandWork) +
                  " parser states after one byte)");
    const GrammarElement& e = el[pos];
    if (e.kind == GrammarElement::kBytes) {
      const StackTop t{pos, parent};
      // New within this call (seen_); only tops from before the call may equal it.
      if (std::find(out.begin(), out.begin() + out_base_, t) == out.begin() + out_base_) out.push_back(t);
      return;
    }
    if (e.kind == GrammarElement::kRule) {
      const int32_t ret = el[pos + 1].kind == GrammarElement::kEnd ? parent : push(pos + 1, parent);
      expand_alts(e.arg, ret, out, flags, depth);
      return;
    }
    if (parent == kRootParent) {
      flags.accept = true;
      return;
    }
    if (parent == kBaseParent) {
      flags.base = true;
      return;
    }
    const StackNode n = nodes_[parent];
    pos = n.pos;
    parent = n.parent;
  }
}

void GrammarStack::advance(const std::vector<StackTop>& from, uint8_t b, std::vector<StackTop>& out,
                           ExpandFlags& flags) {
  begin_call(out);
  const std::vector<GrammarElement>& el = g_.elements;
  for (const StackTop& t : from) {
    if (byte_set_has(g_.byte_sets[el[t.pos].arg], b)) expand_at(t.pos + 1, t.parent, out, flags, 0);
  }
}

}  // namespace vireo::structured
