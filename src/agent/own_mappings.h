// src/agent/own_mappings.h
//
// The memory the agent maps for itself (MapZeroed, base/raw_mapping.h: the in-process writer's
// rings, the unwinder's and the sampler's tables, Python's code table), listed so that the
// writer can tell `memlens rss` which anonymous memory is memlens's own (kMappings' `own`):
// the kernel joins it with the program's memory beside it, and not every kernel names it.
// Two lists of fixed slots, no heap: the agent's, and the exchange's for a hosted writer. A
// mapping made while every slot is taken (some 120 threads recording in-process) is not listed:
// `memlens rss` then finds no owner for it.
//
// Runs on: any thread that maps or unmaps (lock-free slots); read by the writer.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "agent/writer/exchange.h"

namespace memlens::agent {

// From now on, every MapZeroed and Unmap of the agent is listed (the agent's start).
void WatchOwnMappings();
// The agent's own list (the in-process writer reads it).
const OwnMappingSlot* OwnMappingSlots();
// A new image in the exchange: its list starts empty, then gets every mapping listed so far.
void CopyOwnMappingsTo(OwnMappingSlot* slots);
// The listed mappings, by start. Inline: memlens run's hosted writer reads the exchange's list
// without the rest of the agent.
inline void ListOwnMappings(const OwnMappingSlot* slots,
                            std::vector<std::pair<uint64_t, uint64_t>>* out) {
  out->clear();
  for (size_t i = 0; i < kOwnMappingSlots; ++i) {
    // A slot emptied and taken again between the loads would pair one mapping's start with
    // another's size: read until the start holds still around the size.
    for (int tries = 0; tries < 4; ++tries) {
      const uint64_t start = slots[i].start.load(std::memory_order_acquire);
      const uint64_t bytes = slots[i].bytes.load(std::memory_order_acquire);
      if (slots[i].start.load(std::memory_order_acquire) != start) continue;
      if (start && bytes) out->push_back({start, bytes});
      break;
    }
  }
  std::sort(out->begin(), out->end());
}

}  // namespace memlens::agent
