// src/base/zero_mapped_cache.h
//
// ZeroMappedCache: a direct-mapped table of kSlots entries whose all-zero entry is empty,
// mapped zero-filled (raw_mapping.h), so that a page costs only once a slot on it is used. The
// writer builds its tables as recording starts, on the program's thread, in every process it
// records: zeros written up front cost a short-lived child of a --follow-children run some 200
// page faults (the encoder's 448 KiB), the stack interner's 2.2 MiB some 560. Every hit must be
// verified by the caller: if the mapping fails, one slot still gives right answers, slower.
//
// Runs on: whichever thread owns it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "base/raw_mapping.h"

namespace memlens {

template <typename T, size_t kSlots>
class ZeroMappedCache {
  static_assert((kSlots & (kSlots - 1)) == 0, "a power of two: keys are masked");
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

}  // namespace memlens
