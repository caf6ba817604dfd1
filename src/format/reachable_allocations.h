// src/format/reachable_allocations.h
//
// The allocations of one thread that its releases may name by back-reference
// (docs/capture-format.md, section 5): those of the kReleaseReachChunks chunks before the
// current one and of the current one so far, in order. The writer (RecordEncoder) and every
// reader (DecodeState) keep the same lists, chunk by chunk.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "format/records.h"

namespace memlens::format {

struct ReachableAllocations {
  std::vector<uint64_t> addresses;
  size_t current = 0;           // where the current chunk's begin
  std::deque<size_t> previous;  // allocations in each earlier chunk in reach, oldest first

  // The current chunk ended: its allocations join the earlier ones, and those of the chunk
  // that falls out of reach are forgotten. A chunk without allocations of the thread counts
  // too: reach is counted in chunks, not allocations.
  void NextChunk() {
    previous.push_back(addresses.size() - current);
    if (previous.size() > kReleaseReachChunks) {
      addresses.erase(addresses.begin(), addresses.begin() + static_cast<ptrdiff_t>(previous.front()));
      previous.pop_front();
    }
    current = addresses.size();
  }
  // True when the back-th latest allocation listed is at `address`.
  bool Holds(uint64_t back, uint64_t address) const {
    return back != 0 && back <= addresses.size() && addresses[addresses.size() - back] == address;
  }
};

}  // namespace memlens::format
