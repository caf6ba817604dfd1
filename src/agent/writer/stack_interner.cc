// src/agent/writer/stack_interner.cc: see stack_interner.h.
#include "agent/writer/stack_interner.h"

namespace memlens::agent {
namespace {

inline uint64_t Mix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return h;
}

}  // namespace

StackInterner::StackInterner() : nodes_(1, Node{0, 0}), children_(size_t{1} << 12, 0) {}

void StackInterner::ForgetPaths() {
  children_.assign(children_.size(), 0);
  children_used_ = 0;
  first_live_node_ = nodes_.size();
  ++generation_;
  cache_.Clear();
  edges_.Clear();
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
