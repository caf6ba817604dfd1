// src/format/reachable_allocations.h
//
// What one thread's events in a chunk are coded against (docs/capture-format.md, section 5):
// its allocations that releases may name by back-reference, those of the kReleaseReachChunks
// chunks before the current one and of the current one so far, in order; and the blocks it
// released in the current chunk, which its allocations may reuse. The writer (RecordEncoder)
// and every reader (DecodeState) keep the same, chunk by chunk.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "format/records.h"
#include "format/reused_blocks.h"

namespace memlens::format {

class ReachableAllocations {
 public:
  static constexpr uint16_t kMaxNeighbourClass = 257;  // ReuseClass(4096)
  size_t size() const { return static_cast<size_t>(end_ - begin_); }  // allocations in reach
  // Allocations listed since the thread's first (Address(1) is the added()-th).
  uint64_t added() const { return end_; }
  bool empty() const { return end_ == begin_; }
  // Numbers the allocations of a new list from n + 1 on (the writer's: so that they differ
  // from every number an earlier list of the thread gave).
  void StartAt(uint64_t n) { begin_ = end_ = current_ = n; }
  void Add(uint64_t address, uint64_t bytes, uint32_t origin) {
    if (size() == capacity()) Grow();
    const size_t at = static_cast<size_t>(end_++) & (capacity() - 1);
    addresses_[at] = address;
    classes_[at] = static_cast<uint16_t>(ReuseClass(bytes));
    origins_[at] = origin;
  }
  // Of the back-th latest allocation (1 <= back <= size()): its address, and the chunk that
  // coded the address in full.
  uint64_t Address(uint64_t back) const { return addresses_[Slot(back)]; }
  uint32_t Origin(uint64_t back) const { return origins_[Slot(back)]; }
  // Where the block after the back-th latest allocation would start, were glibc's malloc to
  // carve it right behind (its chunk: the size plus 8, rounded up to 16, at least 32; that is
  // 16 x ReuseClass up to 4096 bytes); 0 for a larger or unsized allocation (section 5).
  uint64_t End(uint64_t back) const { return EndAt(Address(back), classes_[Slot(back)]); }
  // The same, of an allocation of `bytes` at `address` (0 for a release's size: unsized).
  static uint64_t EndOf(uint64_t address, uint64_t bytes) {
    return EndAt(address, ReuseClass(bytes));
  }
  // True when the back-th latest allocation was made in the current chunk.
  bool InCurrentChunk(uint64_t back) const { return end_ - back >= current_; }
  // True when the back-th latest allocation listed is at `address`.
  bool Holds(uint64_t back, uint64_t address) const {
    return back != 0 && back <= size() && Address(back) == address;
  }
  // A release named the back-th latest allocation: a free (or a realloc's old block) puts it
  // first among the blocks of its size class that allocations may reuse.
  void Released(EventKind kind, uint64_t back) {
    if (kind != EventKind::kFree && kind != EventKind::kReallocOld) return;
    size_t at = Slot(back);
    reused.Push(classes_[at], {addresses_[at], origins_[at]});
  }
  // The current chunk ended: its allocations join the earlier ones, and those of the chunk
  // that falls out of reach are forgotten. A chunk without allocations of the thread counts
  // too: reach is counted in chunks, not allocations. The reused blocks start over.
  void NextChunk() {
    previous_.push_back(end_ - current_);
    if (previous_.size() > kReleaseReachChunks) {
      begin_ += previous_.front();
      previous_.pop_front();
    }
    current_ = end_;
    reused.Clear();
  }

  ReusedBlocks reused;  // released in the current chunk

 private:
  // Rings (a power-of-two capacity, doubled when full): the allocations numbered begin_ to
  // end_ - 1 since the thread's first, oldest first; no entry moves as reach advances.
  static uint64_t EndAt(uint64_t address, uint32_t size_class) {
    return size_class >= 2 && size_class <= kMaxNeighbourClass ? address + 16u * size_class : 0;
  }
  size_t capacity() const { return addresses_.size(); }
  size_t Slot(uint64_t back) const { return static_cast<size_t>(end_ - back) & (capacity() - 1); }
  void Grow() {
    size_t old = capacity(), grown = old == 0 ? 1024 : 2 * old;
    std::vector<uint64_t> addresses(grown);
    std::vector<uint16_t> classes(grown);
    std::vector<uint32_t> origins(grown);
    for (uint64_t n = begin_; n < end_; ++n) {
      addresses[n & (grown - 1)] = addresses_[n & (old - 1)];
      classes[n & (grown - 1)] = classes_[n & (old - 1)];
      origins[n & (grown - 1)] = origins_[n & (old - 1)];
    }
    addresses_.swap(addresses);
    classes_.swap(classes);
    origins_.swap(origins);
  }

  // Apart, so that the writer's search for a release's allocation reads addresses only.
  std::vector<uint64_t> addresses_;
  std::vector<uint16_t> classes_;   // ReuseClass of the allocation's size (0 for no size)
  std::vector<uint32_t> origins_;   // the chunk that coded the address in full
  uint64_t begin_ = 0, end_ = 0;    // allocation numbers in reach: [begin_, end_)
  uint64_t current_ = 0;            // the first of the current chunk
  std::deque<uint64_t> previous_;   // allocations in each earlier chunk in reach, oldest first
};

}  // namespace memlens::format
