// src/agent/writer/stack_interner.h
//
// StackInterner: turns captured stacks (return addresses, innermost first) into ids of a trie
// whose root is the outermost frame, so a stack seen a million times costs one id in the
// capture and common prefixes are stored once.
//
// Memory: 16 bytes per node plus an id table kept at most 70% full, a fixed-size cache of
// recent whole stacks (Python programs make hundreds of thousands of deep, distinct stacks) and
// a fixed-size cache of recent trie steps (2 MiB and 192 KiB, mapped zero-filled: a page costs
// only once a slot on it is used, so a short run does not pay for them up front).
// Runs on: the writer thread only. Not thread-safe; never touched by application threads.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/raw_mapping.h"

namespace memlens::agent {

class StackInterner {
 public:
  StackInterner();

  // Returns the id of the innermost node of frames[0..count) (0 for an empty stack). For each
  // node created, on_new_node(parent_id, ip) is called, parents first; ids are 1, 2, 3... in
  // that order, matching the implicit numbering of kStackNode records.
  template <typename Fn>
  uint64_t Intern(const uint64_t* frames, int count, Fn&& on_new_node);

  // The id of node `parent`'s child for frame ip (parent 0: the root, ip an outermost frame);
  // creates it, calling on_new_node(parent, ip), when new. Extending a path one frame at a
  // time, outermost first, gives the same id as Intern of the whole stack.
  template <typename Fn>
  uint64_t Extend(uint64_t parent, uint64_t ip, Fn&& on_new_node) {
    bool created = false;
    uint64_t id = Step(parent, ip, &created);
    if (created) on_new_node(parent, ip);
    return id;
  }

  size_t node_count() const { return nodes_.size() - 1; }
  // Changes whenever ForgetPaths runs: ids from an older generation must not be extended.
  uint64_t generation() const { return generation_; }
  // From now on every stack gets new nodes (ids go on rising): after a module is unloaded the
  // same addresses may belong to another library.
  void ForgetPaths();

 private:
  // A direct-mapped cache of kSlots entries whose all-zero entry is empty, mapped zero-filled:
  // a page costs only once a slot on it is used (the writer is built on the program's thread
  // as recording starts, where 2.2 MiB of zeros written up front cost some 560 page faults).
  // Every hit is verified by the caller, so if the mapping fails one slot still gives right
  // answers, only more slowly.
  template <typename T, size_t kSlots>
  class ZeroMappedCache {
   public:
    ZeroMappedCache() : slots_(static_cast<T*>(MapZeroed(kSlots * sizeof(T)))) {
      if (slots_) {
        mask_ = kSlots - 1;
      } else {
        slots_ = &fallback_;
      }
    }
    ~ZeroMappedCache() {
      if (slots_ != &fallback_) Unmap(slots_, kSlots * sizeof(T));
    }
    ZeroMappedCache(const ZeroMappedCache&) = delete;
    ZeroMappedCache& operator=(const ZeroMappedCache&) = delete;
    T& operator[](uint64_t key) { return slots_[key & mask_]; }
    // Every slot empty again; the pages go back to the kernel.
    void Clear() {
      if (slots_ == &fallback_ || !RezeroMapping(slots_, kSlots * sizeof(T))) {
        std::fill_n(slots_, mask_ + 1, T{});
      }
    }

   private:
    T* slots_;
    uint64_t mask_ = 0;
    T fallback_{};
  };

  struct Node {
    uint64_t parent;
    uint64_t ip;
  };
  // A recent whole stack, checked against its depth and innermost frame: a false hit needs a
  // 64-bit hash collision between two stacks of the same depth and innermost frame.
  struct CachedStack {
    uint64_t hash;  // 0: empty
    uint64_t id;
    uint64_t innermost;
    uint64_t depth;
  };
  static constexpr size_t kCachedStacks = size_t{1} << 16;
  // A recent trie step, direct-mapped by parent ^ ip: one load and two compares instead of
  // hashing into children_ and comparing with the node there (two dependent loads). Deep
  // stacks are interned one step per new frame, so this is most of the writer's work on them.
  struct Edge {
    uint64_t parent;
    uint64_t ip;
    uint64_t child;  // 0: empty
  };
  static constexpr size_t kEdges = size_t{1} << 13;

  uint64_t Step(uint64_t parent, uint64_t ip, bool* created) {
    Edge& edge = edges_[parent ^ ip];
    if (edge.child != 0 && edge.parent == parent && edge.ip == ip) return edge.child;
    uint64_t id = Child(parent, ip, created);
    edge = {parent, ip, id};
    return id;
  }

  static uint64_t HashStack(const uint64_t* frames, int count);
  static uint64_t HashChild(uint64_t parent, uint64_t ip);
  uint64_t Child(uint64_t parent, uint64_t ip, bool* created);
  void GrowChildren();

  std::vector<Node> nodes_;        // by id; nodes_[0] is the root
  std::vector<uint64_t> children_;  // open addressing: ids of nodes by (parent, ip); 0 = empty
  size_t children_used_ = 0;
  size_t first_live_node_ = 1;  // nodes below this were forgotten by ForgetPaths
  uint64_t generation_ = 0;     // ForgetPaths calls so far
  ZeroMappedCache<CachedStack, kCachedStacks> cache_;  // by hash
  ZeroMappedCache<Edge, kEdges> edges_;                // by parent ^ ip
};

template <typename Fn>
uint64_t StackInterner::Intern(const uint64_t* frames, int count, Fn&& on_new_node) {
  if (count == 0) return 0;
  uint64_t hash = HashStack(frames, count);
  CachedStack& cached = cache_[hash];
  if (cached.hash == hash && cached.innermost == frames[0] &&
      cached.depth == static_cast<uint64_t>(count)) {
    return cached.id;
  }
  uint64_t id = 0;
  for (int i = count - 1; i >= 0; --i) {
    bool created = false;
    uint64_t parent = id;
    id = Step(parent, frames[i], &created);
    if (created) on_new_node(parent, frames[i]);
  }
  cached = {hash, id, frames[0], static_cast<uint64_t>(count)};
  return id;
}

}  // namespace memlens::agent
