// src/agent/own_mappings.cc: see own_mappings.h.
#include "agent/own_mappings.h"

#include "agent/writer/hosted.h"
#include "base/raw_mapping.h"

namespace memlens::agent {
namespace {

OwnMappingSlot g_own[kOwnMappingSlots];

// A full list leaves the mapping out: rss counts it as unexplained, nothing worse.
void Note(OwnMappingSlot* slots, uint64_t start, uint64_t bytes, bool mapped) {
  for (size_t i = 0; i < kOwnMappingSlots; ++i) {
    OwnMappingSlot& slot = slots[i];
    if (mapped) {
      uint64_t free = 0;
      if (slot.start.compare_exchange_strong(free, start, std::memory_order_acq_rel)) {
        slot.bytes.store(bytes, std::memory_order_release);
        return;
      }
    } else if (slot.start.load(std::memory_order_acquire) == start) {
      slot.bytes.store(0, std::memory_order_release);
      slot.start.store(0, std::memory_order_release);
      return;
    }
  }
}

void Observe(void* mem, size_t bytes, bool mapped) {
  const uint64_t start = reinterpret_cast<uint64_t>(mem);
  Note(g_own, start, bytes, mapped);
  // Not in a child made without the fork handlers (_Fork): the exchange is its parent's.
  if (g_exchange && g_exchange_attached && *g_exchange_attached) {
    Note(g_exchange->own_mappings, start, bytes, mapped);
  }
}

}  // namespace

void WatchOwnMappings() { g_raw_mapping_observer = Observe; }

const OwnMappingSlot* OwnMappingSlots() { return g_own; }

void CopyOwnMappingsTo(OwnMappingSlot* slots) {
  for (size_t i = 0; i < kOwnMappingSlots; ++i) {
    slots[i].bytes.store(0, std::memory_order_relaxed);
    slots[i].start.store(0, std::memory_order_relaxed);
  }
  for (size_t i = 0; i < kOwnMappingSlots; ++i) {
    const uint64_t start = g_own[i].start.load(std::memory_order_acquire);
    const uint64_t bytes = g_own[i].bytes.load(std::memory_order_acquire);
    if (start && bytes) Note(slots, start, bytes, true);
  }
}

}  // namespace memlens::agent
