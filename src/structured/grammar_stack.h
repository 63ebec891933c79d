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

// Rule references nested this deep without consuming a byte mean left recursion (refused when the
// grammar is built, as are longer chains of rules) or a nesting too deep to follow on the engine
// thread's stack.
inline constexpr int kMaxExpandDepth = 1000;

struct StackTop {
  int32_t pos = 0;     // a kBytes element
  int32_t parent = 0;  // return node id, or kRootParent / kBaseParent
  bool operator==(const StackTop&) const = default;
};

struct StackNode {
  int32_t pos = 0;     // where to continue after the callee ends
  int32_t parent = 0;  // the caller's own return node
  bool operator==(const StackNode&) const = default;
};

struct ExpandFlags {
  bool accept = false;  // reached the end of the root rule
  bool base = false;    // reached kBaseParent
};

// An open-addressing table from a (pos, parent) pair to an int32 (linear probing, power-of-two size).
// Used both as the per-call visited set (entries of older calls are told apart by a stamp, so clearing
// is O(1)) and as the hash-consing index of return nodes.
class PairTable {
 public:
  static uint64_t key(int32_t pos, int32_t parent) {
    return (uint64_t{static_cast<uint32_t>(pos)} << 32) | static_cast<uint32_t>(parent);
  }
  void new_stamp();
  // The slot's value for `k`, inserted with `fresh` when absent (`inserted` says which).
  int32_t& find_or_insert(uint64_t k, int32_t fresh, bool& inserted);
  size_t size() const { return count_; }

 private:
  void grow();
  std::vector<uint64_t> keys_;
  std::vector<int32_t> values_;
  std::vector<uint32_t> stamps_;  // a slot is used when its stamp is the current one
  uint32_t stamp_ = 1;
  size_t count_ = 0;
};

class GrammarStack {
 public:
  explicit GrammarStack(const Grammar& g) : g_(g) {}

  // Adds to `out` every top reachable from `pos` (with return node `parent`) without consuming a byte.
  // A rule reference that ends its alternative is a tail call: it does not push a node, so loops
  // written as right recursion keep a constant stack depth.
  void expand(int32_t pos, int32_t parent, std::vector<StackTop>& out, ExpandFlags& flags);
  // The same from every alternative of `rule` (the matcher's start: the root rule, kRootParent).
  void expand_rule(int32_t rule, int32_t parent, std::vector<StackTop>& out, ExpandFlags& flags);
  // The tops of `from` whose byte set holds `b`, moved past it and expanded into `out`.
  void advance(const std::vector<StackTop>& from, uint8_t b, std::vector<StackTop>& out, ExpandFlags& flags);
  // All three throw vireo::Error for rule references nested too deeply without consuming a byte, or
  // an expansion visiting more than kMaxExpandWork configurations (a pathological grammar: one
  // request fails instead of the engine thread spinning).

  // The node (pos, parent), hash-consed: an equal node already in the arena is returned, so equal
  // stacks have equal ids (tops dedupe, and the per-call visited set sees them as one).
  int32_t push(int32_t pos, int32_t parent);
  // Configurations all later calls together may still visit before they throw (the matcher bounds one
  // token mask this way: a grammar whose masks need more work fails its request instead of holding the
  // engine thread for seconds); unlimited by default.
  void set_work_budget(uint64_t n) { budget_ = n; }
  const StackNode& node(int32_t id) const { return nodes_[id]; }
  // Nodes made after mark() can be dropped with rollback() once nothing refers to them. The
  // hash-cons index keeps its entries: push() checks an entry's node is still in the arena and
  // equal, so dropping costs nothing (the trie walk rolls back at every trie node).
  size_t mark() const { return nodes_.size(); }
  void rollback(size_t m) { nodes_.resize(m); }
  const Grammar& grammar() const { return g_; }

 private:
  void begin_call(const std::vector<StackTop>& out);
  void expand_alts(int32_t rule, int32_t ret, std::vector<StackTop>& out, ExpandFlags& flags, int depth);
  void expand_at(int32_t pos, int32_t parent, std::vector<StackTop>& out, ExpandFlags& flags, int depth);

  const Grammar& g_;
  std::vector<StackNode> nodes_;
  PairTable interned_;  // (pos, parent) -> node id, possibly stale (see rollback)
  PairTable seen_;      // configurations visited in the current call
  size_t out_base_ = 0; // tops of `out` from before the current call (checked for duplicates)
  uint64_t budget_ = ~uint64_t{0};
};

}  // namespace vireo::structured
