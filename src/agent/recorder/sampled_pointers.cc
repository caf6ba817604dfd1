// src/agent/recorder/sampled_pointers.cc: see sampled_pointers.h. Allocation hot path.
#include "agent/recorder/sampled_pointers.h"

#include <sched.h>
#include <time.h>
#include <unistd.h>

#include "base/monotonic_clock.h"
#include "base/raw_mapping.h"

namespace memlens::agent {
namespace {

// Bounded waits: spin briefly (the holder is a few instructions from done), then yield the CPU,
// then sleep: a holder that was preempted inside its few instructions runs again within a
// scheduler tick or two, and a program with more threads than cores preempts holders often
// (churn with 4 threads on 2 cores lost a few sampled blocks per run to the yields alone). Only
// a lock word that stays the same for kStuckNs means a holder that will not come back (a
// thread that jumped out of a signal handler, or is stopped by a debugger): then give up.
constexpr int kSpins = 128;
constexpr int kYields = 384;
constexpr uint64_t kStuckNs = 100000000;  // 100 ms

}  // namespace

// Under the shard lock. The bit is set before the block's address can reach another thread
// (the caller returns it to the program afterwards).
void SampledPointers::CountIntoFilter(Shard& shard, uint64_t key) {
  uint64_t part = filter_[ShardIndex(key)].load(std::memory_order_relaxed);
  uint64_t bit = FilterBit(key, part);
  uint8_t& count = shard.counts[bit];
  if (count < kSaturated) ++count;
  auto& word = reinterpret_cast<std::atomic<uint64_t>*>(part & ~kFilterShiftMask)[bit / 64];
  word.store(word.load(std::memory_order_relaxed) | uint64_t{1} << (bit % 64),
             std::memory_order_relaxed);
}

// Under the shard lock: the bit is cleared with the last live block on it. A saturated count
// stays, and so does its bit: a false "maybe" for good, never a false "not sampled".
void SampledPointers::CountOutOfFilter(Shard& shard, uint64_t key) {
  uint64_t part = filter_[ShardIndex(key)].load(std::memory_order_relaxed);
  uint64_t bit = FilterBit(key, part);
  uint8_t& count = shard.counts[bit];
  if (count == kSaturated || --count != 0) return;
  auto& word = reinterpret_cast<std::atomic<uint64_t>*>(part & ~kFilterShiftMask)[bit / 64];
  word.store(word.load(std::memory_order_relaxed) & ~(uint64_t{1} << (bit % 64)),
             std::memory_order_relaxed);
}

// Under the shard lock: a part four times larger, filled from the shard's table, then
// published whole (release: its bits before its name). The old part stays mapped for readers
// that loaded its name; when no memory can be mapped the old one stays, only fuller.
void SampledPointers::GrowFilter(Shard& shard, uint64_t shard_index) {
  const uint64_t log_bits = FilterLog(filter_[shard_index].load(std::memory_order_relaxed)) + 2;
  const uint64_t bits = uint64_t{1} << log_bits;
  auto* mem = static_cast<uint8_t*>(MapZeroed(bits / 8 + bits));  // words, then counts
  if (!mem) return;
  auto* words = reinterpret_cast<std::atomic<uint64_t>*>(mem);
  uint8_t* counts = mem + bits / 8;
  const uint64_t mask = shard.mask.load(std::memory_order_relaxed);
  const Slot* slots = shard.slots.load(std::memory_order_relaxed);
  for (uint64_t i = 0; i <= mask; ++i) {
    uint64_t a = slots[i].address.load(std::memory_order_relaxed);
    if (a == 0) continue;
    uint64_t bit = FilterBit(FilterKey(a), 64 - log_bits);
    if (counts[bit] < kSaturated) ++counts[bit];
    words[bit / 64].store(words[bit / 64].load(std::memory_order_relaxed) | uint64_t{1} << (bit % 64),
                          std::memory_order_relaxed);
  }
  shard.counts = counts;
  filter_[shard_index].store(FilterPart(mem, log_bits), std::memory_order_release);
}

SampledPointers::Slot* SampledPointers::MapSlots(uint64_t count) {
  // The raw system call: neither our mmap hook nor any allocator. Zeroed: every slot empty.
  return static_cast<Slot*>(MapZeroed(count * sizeof(Slot)));
}

bool SampledPointers::Init() {
  Slot* first = MapSlots(kInitialSlots * kShards);  // the first tables side by side
  // The first filter parts side by side too (8 KiB: every free loads from it), then their
  // counts.
  constexpr uint64_t kBits = uint64_t{1} << kInitialFilterLog;
  auto* filter = static_cast<uint8_t*>(MapZeroed(kShards * (kBits / 8 + kBits)));
  if (!first || !filter) return false;
  for (int i = 0; i < kShards; ++i) {
    shards_[i].slots.store(first + i * kInitialSlots, std::memory_order_relaxed);
    shards_[i].mask.store(kInitialSlots - 1, std::memory_order_release);
    shards_[i].counts = filter + kShards * kBits / 8 + i * kBits;
    filter_[i].store(FilterPart(filter + i * kBits / 8, kInitialFilterLog),
                     std::memory_order_release);
  }
  return true;
}

bool SampledPointers::LockSlow(Shard& shard, uint32_t* seq) {
  uint32_t seen = 0;
  uint64_t seen_since = 0;  // when the lock word last changed, once sleeping
  for (int attempt = 0;; ++attempt) {
    uint32_t s = shard.seq.load(std::memory_order_relaxed);
    if (!(s & 1)) {
      if (shard.seq.compare_exchange_weak(s, s + 1, std::memory_order_acquire,
                                          std::memory_order_relaxed)) {
        *seq = s + 1;
        return true;
      }
      continue;  // another thread took it first
    }
    if (s == shard.abandoned.load(std::memory_order_relaxed)) return false;  // gave up on it
    if (attempt < kSpins) {
      __builtin_ia32_pause();
      continue;
    }
    // The stuck bound counts from the first yield: on a loaded machine each yield may wait a
    // whole time slice, and a thousand of them took two seconds in CI.
    uint64_t now = MonotonicNs();
    if (s != seen || seen_since == 0) {
      seen = s;
      seen_since = now;
    } else if (now - seen_since > kStuckNs) {
      shard.abandoned.store(s, std::memory_order_relaxed);  // the next ones give up at once
      return false;
    }
    if (attempt < kSpins + kYields) {
      sched_yield();
    } else {
      timespec pause{0, 50000};
      nanosleep(&pause, nullptr);
    }
  }
}

// Returns true when the address was not there yet.
inline bool SampledPointers::Place(Slot* slots, uint64_t mask, uint64_t address,
                                   uint64_t size) {
  for (uint64_t i = HomeHash(address) & mask;; i = (i + 1) & mask) {
    uint64_t a = slots[i].address.load(std::memory_order_relaxed);
    if (a == address || a == 0) {
      slots[i].size.store(size, std::memory_order_relaxed);
      slots[i].address.store(address, std::memory_order_relaxed);
      return a == 0;
    }
  }
}

bool SampledPointers::Grow(Shard& shard) {
  uint64_t old_mask = shard.mask.load(std::memory_order_relaxed);
  Slot* old = shard.slots.load(std::memory_order_relaxed);
  uint64_t mask = old_mask * 2 + 1;
  Slot* slots = MapSlots(mask + 1);
  if (!slots) return false;
  for (uint64_t i = 0; i <= old_mask; ++i) {
    uint64_t a = old[i].address.load(std::memory_order_relaxed);
    if (a != 0) Place(slots, mask, a, old[i].size.load(std::memory_order_relaxed));
  }
  shard.slots.store(slots, std::memory_order_release);
  shard.mask.store(mask, std::memory_order_release);
  return true;
}

// Backward shift: later members of the probe run move into the hole when that brings them no
// further from their home slot, so lookups can stop at the first empty slot.
void SampledPointers::EraseAt(Slot* slots, uint64_t mask, uint64_t index) {
  uint64_t hole = index;
  for (uint64_t j = (index + 1) & mask;; j = (j + 1) & mask) {
    uint64_t a = slots[j].address.load(std::memory_order_relaxed);
    if (a == 0) break;
    uint64_t home = HomeHash(a) & mask;
    if (((j - home) & mask) >= ((j - hole) & mask)) {
      slots[hole].size.store(slots[j].size.load(std::memory_order_relaxed),
                             std::memory_order_relaxed);
      slots[hole].address.store(a, std::memory_order_relaxed);
      hole = j;
    }
  }
  slots[hole].address.store(0, std::memory_order_relaxed);
}

bool SampledPointers::Insert(uint64_t address, uint64_t size) {
  const uint64_t key = FilterKey(address);
  Shard& shard = shards_[ShardIndex(key)];
  uint32_t seq;
  if (!Lock(shard, &seq)) return false;
  // Keep runs short: at most half full.
  if ((shard.used + 1) * 2 > shard.mask.load(std::memory_order_relaxed) + 1 && !Grow(shard)) {
    Unlock(shard, seq);
    return false;
  }
  if (Place(shard.slots.load(std::memory_order_relaxed), shard.mask.load(std::memory_order_relaxed),
            address, size)) {
    ++shard.used;
    uint64_t log_bits = FilterLog(filter_[ShardIndex(key)].load(std::memory_order_relaxed));
    if (shard.used * kFilterBitsPerBlock > uint64_t{1} << log_bits && log_bits < kMaxFilterLog) {
      GrowFilter(shard, ShardIndex(key));  // fills the new part from the table, this block too
    } else {
      CountIntoFilter(shard, key);
    }
  }
  Unlock(shard, seq);
  return true;
}

SampledPointers::Lookup SampledPointers::Take(uint64_t address, uint64_t* size) {
  // The filter answers the free of nearly every unsampled block; past it, the block is nearly
  // always a sampled one, so lock at once (a probe without the lock would be done twice).
  if (!MaybeSampled(address)) return Lookup::kAbsent;
  const uint64_t key = FilterKey(address);
  Shard& shard = shards_[ShardIndex(key)];
  uint32_t seq;
  if (!Lock(shard, &seq)) return Lookup::kBusy;
  const uint64_t mask = shard.mask.load(std::memory_order_relaxed);
  Slot* slots = shard.slots.load(std::memory_order_relaxed);
  Lookup result = Lookup::kAbsent;
  uint64_t i = HomeHash(address) & mask;
  for (uint64_t n = 0; n <= mask; ++n, i = (i + 1) & mask) {
    uint64_t a = slots[i].address.load(std::memory_order_relaxed);
    if (a == 0) break;
    if (a == address) {
      *size = slots[i].size.load(std::memory_order_relaxed);
      EraseAt(slots, mask, i);
      --shard.used;
      CountOutOfFilter(shard, key);
      result = Lookup::kTaken;
      break;
    }
  }
  Unlock(shard, seq);
  return result;
}

size_t SampledPointers::Count() const {
  size_t total = 0;
  for (const Shard& shard : shards_) total += shard.used;
  return total;
}

}  // namespace memlens::agent
