// src/agent/writer/stack_interner.h
//
// StackInterner: turns captured stacks (return addresses, innermost first) into ids of a trie
// whose root is the outermost frame, so a stack seen a million times costs one id in the
// capture and common prefixes are stored once.
//
// Memory: 4 bytes per node plus a table of 16-byte children kept at most 70% full, a
// fixed-size cache of recent whole stacks (Python programs make hundreds of thousands of deep,
// distinct stacks) and a fixed-size cache of recent trie steps (2 MiB and 192 KiB, mapped
// zero-filled: a page costs only once a slot on it is used, so a short run does not pay for
// them up front).
// Runs on: the writer thread only. Not thread-safe; never touched by application threads.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/zero_mapped_cache.h"

namespace memlens::agent {

class StackInterner {
 public:
  StackInterner();

  // Returns the id of the innermost node of frames[0..count) (0 for an empty stack). For each
  // node created, on_new_node(parent_id, ip) is called, parents first; ids are 1, 2, 3... in
  // that order, matching the implicit numbering of kStackNode records.
  template <typename Fn>
  uint64_t Intern(const uint64_t* frames, int count, Fn&& on_new_node) {
    if (count == 0) return 0;
    uint64_t hash = HashStack(frames, count);
    CachedStack& cached = cache_[hash];
    if (cached.hash == hash && cached.innermost == frames[0] &&
        cached.depth == static_cast<uint64_t>(count)) {
      return cached.id;
    }
    uint64_t id =
        Walk(0, frames + count - 1, -1, static_cast<size_t>(count), nullptr, on_new_node);
    cached = {hash, id, frames[0], static_cast<uint64_t>(count)};
    return id;
  }

  // Extends node `parent`'s path (0: the root) by frames[0..count), outermost first: ids[i]
  // gets the id of the path through frames[i], created when new (on_new_node(parent, ip), as
  // for Intern). Returns the last id (parent when count is 0). The same path gives the same
  // id as Intern of the whole stack.
  template <typename Fn>
  uint64_t ExtendPath(uint64_t parent, const uint64_t* frames, size_t count, uint64_t* ids,
                      Fn&& on_new_node) {
    return Walk(parent, frames, 1, count, ids, on_new_node);
  }

  size_t node_count() const { return path_hashes_.size() - 1; }
  // Changes whenever ForgetPaths runs: ids from an older generation must not be extended.
  uint64_t generation() const { return generation_; }
  // From now on every stack gets new nodes (ids go on rising): after a module is unloaded the
  // same addresses may belong to another library.
  void ForgetPaths();

 private:
  // A node in the table of children: its parent and frame, compared right there, so that a
  // lookup reads one slot (the table and a separate node list were two cache misses a frame).
  // Ids in 32 bits keep it as small as the id and node the two held: 4 billion nodes would
  // take the writer 100 GiB; past kMaxId, a stack ends at its last node that fits (Find).
  struct Child {
    uint64_t ip;
    uint32_t parent;
    uint32_t id;  // 0: empty
  };
  static constexpr uint64_t kMaxId = 0xffffffffu;
  // A recent whole stack, checked against its depth and innermost frame: a false hit needs a
  // 64-bit hash collision between two stacks of the same depth and innermost frame.
  struct CachedStack {
    uint64_t hash;  // 0: empty
    uint64_t id;
    uint64_t innermost;
    uint64_t depth;
  };
  static constexpr size_t kCachedStacks = size_t{1} << 16;
  // A recent trie step, direct-mapped by parent ^ ip: one load and two compares, in a table
  // that stays in the cache, before the children's table, which may not.
  struct Edge {
    uint64_t parent;
    uint64_t ip;
    uint64_t child;  // 0: empty
  };
  static constexpr size_t kEdges = size_t{1} << 13;
  // Frames whose slots in the children's table are fetched ahead at once, from the first
  // frame of a walk that the trie-step cache misses: their positions come from the path's
  // hashes, known before any id, so the misses of a new path's frames overlap instead of
  // coming one after the other (many distinct deep stacks: 3.5x fewer ns a frame).
  static constexpr size_t kAhead = 32;

  // The hashes of the frames [begin, end) of the walk in progress (Walk, Miss).
  struct Ahead {
    size_t begin = 0, end = 0;
    uint32_t hashes[kAhead];
  };

  // The walk behind Intern and ExtendPath: the frames frame[i * step] for i < count, outermost
  // first, each one's id stored in ids[i] (unless ids is null). A step the trie-step cache
  // knows costs a load and three compares; the rest is Miss's.
  template <typename Fn>
  uint64_t Walk(uint64_t parent, const uint64_t* frame, ptrdiff_t step, size_t count,
                uint64_t* ids, Fn&& on_new_node) {
    uint64_t id = parent;
    Ahead ahead;
    for (size_t i = 0; i < count; ++i, frame += step) {
      const uint64_t ip = *frame;
      Edge& edge = edges_[id ^ ip];
      if (edge.child == 0 || edge.parent != id || edge.ip != ip) {
        bool created = false;
        const uint64_t child = Miss(id, frame, step, i, count, &ahead, &created);
        if (created) on_new_node(id, ip);
        edge = {id, ip, child};
      }
      id = edge.child;
      if (ids) ids[i] = id;
    }
    return id;
  }
  // The child of node id for *frame, the i-th frame of the walk, found or created (*created)
  // in the children's table; hashes the frames ahead (from node id's path) when i is past
  // those hashed.
  uint64_t Miss(uint64_t id, const uint64_t* frame, ptrdiff_t step, size_t i, size_t count,
                Ahead* ahead, bool* created);

  static uint64_t HashStack(const uint64_t* frames, int count);
  // The hash of a path: of its parent's path and its own frame (the root's is a constant).
  // 32 bits place a slot in any table that fits in memory, at 4 bytes a node.
  static uint32_t PathHash(uint32_t parent_hash, uint64_t ip);
  uint64_t Find(uint64_t parent, uint64_t ip, uint32_t hash, bool* created);
  void GrowChildren();

  std::vector<uint32_t> path_hashes_;  // by id; [0] is the root's
  std::vector<Child> children_;  // open addressing by path hash; a power of two, <= 70% full
  size_t children_used_ = 0;
  uint64_t generation_ = 0;     // ForgetPaths calls so far
  ZeroMappedCache<CachedStack, kCachedStacks> cache_;  // by hash
  ZeroMappedCache<Edge, kEdges> edges_;                // by parent ^ ip
};

}  // namespace memlens::agent
