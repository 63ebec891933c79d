// The pushdown runtime of a Grammar: an arena of return nodes (persistent stacks that share their
// bottoms) and the two moves of the matcher, expand (follow rule references and rule ends without
// consuming input) and advance (consume one byte). A state is a set of StackTops, each a kBytes
// position waiting for its byte plus the return node to pop to when its alternative ends.
#pragma once
#include <cstdint>
#include <vector>

#include "structured/grammar.h"

namespace vireo::structured {

// Parent ids below 0: the end of the grammar's root (the output may stop here), or the bottom of
// a partial stack used to classify tokens without the rest of the context (token_classifier.h).
inline constexpr int32_t kRootParent = -1;
inline constexpr int32_t kBaseParent = -2;

struct StackTop {
  int32_t pos = 0;     // a kBytes element
  int32_t parent = 0;  // return node id, or kRootParent / kBaseParent
  bool operator==(const StackTop&) const = default;
};

struct StackNode {
  int32_t pos = 0;     // where to continue after the callee ends
  int32_t parent = 0;  // the caller's own return node
};

struct ExpandFlags {
  bool accept = false;  // reached the end of the root rule
  bool base = false;    // reached kBaseParent
};

class GrammarStack {
 public:
  explicit GrammarStack(const Grammar& g) : g_(g) {}

  // Adds to `out` every top reachable from `pos` (with return node `parent`) without consuming a byte.
  // A rule reference that ends its alternative is a tail call: it does not push a node, so loops
  // written as right recursion keep a constant stack depth.
  void expand(int32_t pos, int32_t parent, std::vector<StackTop>& out, ExpandFlags& flags);
  // The tops of `from` whose byte set holds `b`, moved past it and expanded into `out`.
  void advance(const std::vector<StackTop>& from, uint8_t b, std::vector<StackTop>& out, ExpandFlags& flags);

  int32_t push(int32_t pos, int32_t parent);
  const StackNode& node(int32_t id) const { return nodes_[id]; }
  // Nodes made after mark() can be dropped with rollback() once nothing refers to them.
  size_t mark() const { return nodes_.size(); }
  void rollback(size_t m) { nodes_.resize(m); }
  const Grammar& grammar() const { return g_; }

 private:
  void expand_rule(int32_t rule, int32_t ret, std::vector<StackTop>& out, ExpandFlags& flags, int depth);
  void expand_at(int32_t pos, int32_t parent, std::vector<StackTop>& out, ExpandFlags& flags, int depth);

  const Grammar& g_;
  std::vector<StackNode> nodes_;
};

}  // namespace vireo::structured
