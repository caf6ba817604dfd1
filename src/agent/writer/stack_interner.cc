// src/agent/writer/stack_interner.cc: see stack_interner.h.
#include "agent/writer/stack_interner.h"

#include <algorithm>

#include "base/raw_mapping.h"

namespace memlens::agent {
namespace {

inline uint64_t Mix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return h;
}

}  // namespace

// The writer is made on the application thread as recording starts: zero-filled vectors there
// cost every recorded process some 560 page faults (about 2 ms) before its first line ran.
StackInterner::StackInterner() : nodes_(1, Node{0, 0}), children_(size_t{1} << 12, 0) {
  cache_ = static_cast<CachedStack*>(MapZeroed(kCachedStacks * sizeof(CachedStack)));
  cache_mask_ = cache_ ? kCachedStacks - 1 : 0;
  if (!cache_) cache_ = &fallback_stack_;
  edges_ = static_cast<Edge*>(MapZeroed(kEdges * sizeof(Edge)));
  edge_mask_ = edges_ ? kEdges - 1 : 0;
  if (!edges_) edges_ = &fallback_edge_;
}

StackInterner::~StackInterner() {
  if (cache_ != &fallback_stack_) Unmap(cache_, kCachedStacks * sizeof(CachedStack));
  if (edges_ != &fallback_edge_) Unmap(edges_, kEdges * sizeof(Edge));
}

void StackInterner::ForgetPaths() {
  children_.assign(children_.size(), 0);
  children_used_ = 0;
  first_live_node_ = nodes_.size();
  ++generation_;
  if (cache_mask_ == 0 || !RezeroMapping(cache_, kCachedStacks * sizeof(CachedStack))) {
    std::fill_n(cache_, cache_mask_ + 1, CachedStack{});
  }
  if (edge_mask_ == 0 || !RezeroMapping(edges_, kEdges * sizeof(Edge))) {
    std::fill_n(edges_, edge_mask_ + 1, Edge{0, 0, 0});
  }
}

uint64_t StackInterner::HashStack(const uint64_t* frames, int count) {
  uint64_t h = 0x9e3779b97f4a7c15ULL ^ static_cast<uint64_t>(count);
  for (int i = 0; i < count; ++i) h = Mix(h ^ frames[i]) + 0x9e3779b97f4a7c15ULL;
  return h == 0 ? 1 : h;
}

uint64_t StackInterner::HashChild(uint64_t parent, uint64_t ip) {
  return Mix(parent * 0x9e3779b97f4a7c15ULL ^ ip);
}

uint64_t StackInterner::Child(uint64_t parent, uint64_t ip, bool* created) {
  size_t mask = children_.size() - 1;
  size_t slot = HashChild(parent, ip) & mask;
  for (; children_[slot] != 0; slot = (slot + 1) & mask) {
    const Node& node = nodes_[children_[slot]];
    if (node.parent == parent && node.ip == ip) return children_[slot];
  }
  uint64_t id = nodes_.size();
  nodes_.push_back({parent, ip});
  children_[slot] = id;
  *created = true;
  if (++children_used_ * 10 > children_.size() * 7) GrowChildren();
  return id;
}

void StackInterner::GrowChildren() {
  children_.assign(children_.size() * 2, 0);
  size_t mask = children_.size() - 1;
  for (uint64_t id = first_live_node_; id < nodes_.size(); ++id) {
    size_t slot = HashChild(nodes_[id].parent, nodes_[id].ip) & mask;
    while (children_[slot] != 0) slot = (slot + 1) & mask;
    children_[slot] = id;
  }
}

}  // namespace memlens::agent
