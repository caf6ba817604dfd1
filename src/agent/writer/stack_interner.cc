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

StackInterner::StackInterner() : children_(1 << 12), stacks_(1 << 12) {}

void StackInterner::ForgetPaths() {
  children_.assign(children_.size(), ChildSlot{0, 0, 0});
  children_used_ = 0;
  stacks_.assign(stacks_.size(), StackSlot{0, 0, 0, 0});
  stacks_used_ = 0;
}

uint64_t StackInterner::HashStack(const uint64_t* frames, int count) {
  uint64_t h = 0x9e3779b97f4a7c15ULL ^ static_cast<uint64_t>(count);
  for (int i = 0; i < count; ++i) h = Mix(h ^ frames[i]) + 0x9e3779b97f4a7c15ULL;
  return h == 0 ? 1 : h;
}

uint64_t StackInterner::Child(uint64_t parent, uint64_t ip, bool* created) {
  size_t mask = children_.size() - 1;
  size_t slot = Mix(parent * 0x9e3779b97f4a7c15ULL ^ ip) & mask;
  for (; children_[slot].parent_plus_one != 0; slot = (slot + 1) & mask) {
    if (children_[slot].parent_plus_one == parent + 1 && children_[slot].ip == ip) {
      return children_[slot].id;
    }
  }
  uint64_t id = next_id_++;
  children_[slot] = {parent + 1, ip, id};
  *created = true;
  if (++children_used_ * 2 > children_.size()) GrowChildren();
  return id;
}

void StackInterner::GrowChildren() {
  std::vector<ChildSlot> old(children_.size() * 2);
  old.swap(children_);
  size_t mask = children_.size() - 1;
  for (const ChildSlot& s : old) {
    if (s.parent_plus_one == 0) continue;
    size_t slot = Mix((s.parent_plus_one - 1) * 0x9e3779b97f4a7c15ULL ^ s.ip) & mask;
    while (children_[slot].parent_plus_one != 0) slot = (slot + 1) & mask;
    children_[slot] = s;
  }
}

void StackInterner::GrowStacks() {
  std::vector<StackSlot> old(stacks_.size() * 2);
  old.swap(stacks_);
  size_t mask = stacks_.size() - 1;
  for (const StackSlot& s : old) {
    if (s.hash == 0) continue;
    size_t slot = s.hash & mask;
    while (stacks_[slot].hash != 0) slot = (slot + 1) & mask;
    stacks_[slot] = s;
  }
}

}  // namespace memlens::agent
