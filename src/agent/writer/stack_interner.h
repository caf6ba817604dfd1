// src/agent/writer/stack_interner.h
//
// StackInterner: turns captured stacks (return addresses, innermost first) into ids of a trie
// whose root is the outermost frame, so a stack seen a million times costs one id in the
// capture and common prefixes are stored once.
//
// Runs on: the writer thread only. Not thread-safe; never touched by application threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace memlens::agent {

class StackInterner {
 public:
  StackInterner();

  // Returns the id of the innermost node of frames[0..count) (0 for an empty stack). For each
  // node created, on_new_node(parent_id, ip) is called, parents first; ids are 1, 2, 3... in
  // that order, matching the implicit numbering of kStackNode records.
  template <typename Fn>
  uint64_t Intern(const uint64_t* frames, int count, Fn&& on_new_node);

  size_t node_count() const { return next_id_ - 1; }
  // From now on every stack gets new nodes (ids go on rising): after a module is unloaded the
  // same addresses may belong to another library.
  void ForgetPaths();

 private:
  // Open-addressing tables (linear probing, power-of-two sizes, key 0 = empty slot).
  struct ChildSlot {
    uint64_t parent_plus_one;  // 0 marks an empty slot
    uint64_t ip;
    uint64_t id;
  };
  // A whole-stack hash, checked against the stack's depth and innermost frame: a false hit
  // needs a 64-bit hash collision between two stacks of the same depth and innermost frame.
  // (Walking the trie to verify every hit cost a pointer chase per frame of every event.)
  struct StackSlot {
    uint64_t hash;  // 0 marks an empty slot
    uint64_t id;
    uint64_t innermost;
    uint64_t depth;
  };

  static uint64_t HashStack(const uint64_t* frames, int count);
  uint64_t Child(uint64_t parent, uint64_t ip, bool* created);
  void GrowChildren();
  void GrowStacks();

  uint64_t next_id_ = 1;  // node ids: 1, 2, 3... (0 is the root)
  std::vector<ChildSlot> children_;
  size_t children_used_ = 0;
  std::vector<StackSlot> stacks_;  // cache: whole-stack hash -> innermost id (verified on hit)
  size_t stacks_used_ = 0;
};

template <typename Fn>
uint64_t StackInterner::Intern(const uint64_t* frames, int count, Fn&& on_new_node) {
  if (count == 0) return 0;
  uint64_t hash = HashStack(frames, count);
  size_t mask = stacks_.size() - 1;
  size_t slot = hash & mask;
  for (; stacks_[slot].hash != 0; slot = (slot + 1) & mask) {
    const StackSlot& s = stacks_[slot];
    if (s.hash == hash && s.innermost == frames[0] && s.depth == static_cast<uint64_t>(count)) {
      return s.id;
    }
  }
  uint64_t id = 0;
  for (int i = count - 1; i >= 0; --i) {
    bool created = false;
    uint64_t parent = id;
    id = Child(parent, frames[i], &created);
    if (created) on_new_node(parent, frames[i]);
  }
  stacks_[slot] = {hash, id, frames[0], static_cast<uint64_t>(count)};
  if (++stacks_used_ * 2 > stacks_.size()) GrowStacks();
  return id;
}

}  // namespace memlens::agent
