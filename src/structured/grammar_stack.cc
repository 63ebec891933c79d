#include "structured/grammar_stack.h"

#include <algorithm>

#include "core/error.h"

namespace vireo::structured {
namespace {

// Rule references nested this deep without consuming a byte mean left recursion (a grammar bug).
constexpr int kMaxExpandDepth = 1000;

}  // namespace

int32_t GrammarStack::push(int32_t pos, int32_t parent) {
  nodes_.push_back({pos, parent});
  return static_cast<int32_t>(nodes_.size()) - 1;
}

void GrammarStack::expand(int32_t pos, int32_t parent, std::vector<StackTop>& out, ExpandFlags& flags) {
  expand_at(pos, parent, out, flags, 0);
}

void GrammarStack::expand_rule(int32_t rule, int32_t ret, std::vector<StackTop>& out, ExpandFlags& flags, int depth) {
  if (depth > kMaxExpandDepth) throw Error("structured output: grammar rule '" + g_.rule_names[rule] + "' is left-recursive");
  for (int32_t start : g_.rule_alts[rule]) expand_at(start, ret, out, flags, depth + 1);
}

void GrammarStack::expand_at(int32_t pos, int32_t parent, std::vector<StackTop>& out, ExpandFlags& flags, int depth) {
  const std::vector<GrammarElement>& el = g_.elements;
  while (true) {
    const GrammarElement& e = el[pos];
    if (e.kind == GrammarElement::kBytes) {
      const StackTop t{pos, parent};
      if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
      return;
    }
    if (e.kind == GrammarElement::kRule) {
      const int32_t ret = el[pos + 1].kind == GrammarElement::kEnd ? parent : push(pos + 1, parent);
      expand_rule(e.arg, ret, out, flags, depth);
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
  const std::vector<GrammarElement>& el = g_.elements;
  for (const StackTop& t : from) {
    if (byte_set_has(g_.byte_sets[el[t.pos].arg], b)) expand_at(t.pos + 1, t.parent, out, flags, 0);
  }
}

}  // namespace vireo::structured
