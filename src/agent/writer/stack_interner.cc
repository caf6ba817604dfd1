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

constexpr uint32_t kRootHash = 0x9e3779b9u;

}  // namespace

StackInterner::StackInterner()
    : path_hashes_(1, kRootHash), children_(size_t{1} << 11, Child{}) {}

void StackInterner::ForgetPaths() {
  children_.assign(children_.size(), Child{});
  children_used_ = 0;
  ++generation_;
  cache_.Clear();
  edges_.Clear();
}

uint64_t StackInterner::HashStack(const uint64_t* frames, int count) {
  uint64_t h = 0x9e3779b97f4a7c15ULL ^ static_cast<uint64_t>(count);
  for (int i = 0; i < count; ++i) h = Mix(h ^ frames[i]) + 0x9e3779b97f4a7c15ULL;
  return h == 0 ? 1 : h;
}

uint32_t StackInterner::PathHash(uint32_t parent_hash, uint64_t ip) {
  uint64_t h = (uint64_t{parent_hash} ^ ip) * 0xff51afd7ed558ccdULL;
  h ^= h >> 32;
  h *= 0xc4ceb9fe1a85ec53ULL;
  return static_cast<uint32_t>(h ^ (h >> 29));  // the table takes the low bits
}

uint64_t StackInterner::Miss(uint64_t id, const uint64_t* frame, ptrdiff_t step, size_t i,
                             size_t count, Ahead* ahead, bool* created) {
  if (i >= ahead->end) {
    uint32_t hash = path_hashes_[id];
    ahead->begin = i;
    ahead->end = std::min(count, i + kAhead);
    const uint64_t* f = frame;
    for (size_t k = 0; k < ahead->end - i; ++k, f += step) {
      hash = PathHash(hash, *f);
      ahead->hashes[k] = hash;
      __builtin_prefetch(&children_[hash & (children_.size() - 1)]);
    }
  }
  return Find(id, *frame, ahead->hashes[i - ahead->begin], created);
}

uint64_t StackInterner::Find(uint64_t parent, uint64_t ip, uint32_t hash, bool* created) {
  const size_t mask = children_.size() - 1;
  size_t slot = hash & mask;
  for (; children_[slot].id != 0; slot = (slot + 1) & mask) {
    const Child& child = children_[slot];
    if (child.parent == parent && child.ip == ip) return child.id;
  }
  const uint64_t id = path_hashes_.size();
  if (id > kMaxId) return parent;
  path_hashes_.push_back(hash);
  children_[slot] = {ip, static_cast<uint32_t>(parent), static_cast<uint32_t>(id)};
  *created = true;
  if (++children_used_ * 10 > children_.size() * 7) GrowChildren();
  return id;
}

void StackInterner::GrowChildren() {
  std::vector<Child> grown(children_.size() * 2, Child{});
  const size_t mask = grown.size() - 1;
  for (const Child& child : children_) {
    if (child.id == 0) continue;
    size_t slot = path_hashes_[child.id] & mask;
    while (grown[slot].id != 0) slot = (slot + 1) & mask;
    grown[slot] = child;
  }
  children_.swap(grown);
}

}  // namespace memlens::agent
