// src/agent/recorder/sampled_pointers.h
//
// SampledPointers: the set of live heap blocks that sampling mode recorded, so that a free is
// recorded exactly when its block was (docs/sampling.md). Nothing is kept for unsampled blocks.
//
// Runs on: application threads, inside the allocation hooks. Hot-path rules apply
// (docs/hot-path-rules.md): no heap (tables are mapped with the raw mmap system call), no
// blocking locks, bounded waits.
//
// Layout: 64 shards chosen by a hash of the address; each shard is an open-addressed table of
// 16-byte slots (address, size) with linear probing and backward-shift deletion, so deletions
// leave no tombstones and probe runs stay short however long the program runs.
//
// In front of the tables, a filter: one bit per 1/64 of a shard's share of the address hash,
// set while a sampled block whose address hashes to it is live. The free of an unsampled block
// finds its bit clear and stops there, after a multiplication and two loads, unless a live
// sampled block shares its bit. A count per bit (one byte, written under the shard's lock)
// clears the bit with the last live block on it, so removed blocks leave no stale bits. (A
// 4-byte count missed the cache on every sampled allocation and free; stale bits rebuilt every
// few removals cost more instructions than a byte count, bench/instruction_cost.py.)
//
// Each shard's part of the filter grows with the shard: it starts at 1,024 bits (8 KiB for
// all 64 shards, small enough for the first- or second-level cache; churn's 250 live sampled
// blocks pass 0.4% of other frees) and is replaced by one four times larger, under the
// shard's lock, whenever the shard holds more than one live block per kFilterBitsPerBlock
// bits, so at most about 1.5% of unsampled frees pass it however large the heap (up to 1M
// bits a shard, enough for 32 GiB live at the default rate). A fixed filter
// did not scale: with 1 GiB live (32,768 sampled blocks at the default rate) 39% of frees went
// on to lock a shard and probe its table, and a churn loop beside that heap ran 2.0 times
// slower sampled than unprofiled (2.9 times beside 4 GiB), against 1.18 beside no heap.

// Concurrency: each shard has a lock word (odd while held), taken with a bounded wait by
// the rare calls that get past the filter: a sampled allocation, the free of a sampled block (or
// of one whose filter bit a sampled block shares). The common question, "is this pointer
// sampled?", asked by every free, is the filter's loads and writes nothing shared, so threads
// freeing unsampled blocks never contend. A filter part that is replaced stays mapped, since
// readers may still hold it; it was whole when replaced and is never cleared afterwards, so it
// can only answer "maybe" too often, never "not sampled" for a live block. A table that fills past half is replaced by one twice
// its size; the old one is not unmapped (the first tables of all shards share one mapping),
// which costs at most as much memory again as the current tables.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace memlens::agent {

class SampledPointers {
 public:
  static constexpr int kShards = 64;
  // Per shard at first. Small on purpose: every free probes a table, so the tables of a program
  // with few sampled blocks live (all 64 of them: 16 KiB, mapped together) stay in cache.
  static constexpr uint64_t kInitialSlots = 16;

  enum class Lookup { kAbsent, kTaken, kBusy };

  // Maps every shard's first table. Returns false when the memory cannot be mapped. Once,
  // before any other call.
  bool Init();

  // Remembers a sampled block (overwriting a stale entry at the same address). Returns false
  // when the shard's lock holder never came back or no memory could be mapped: the caller
  // drops the event.
  bool Insert(uint64_t address, uint64_t size);

  // False when the block at address is certainly not in the set: the filter's answer, inline
  // for the free of every unsampled block. After Init only.
  bool MaybeSampled(uint64_t address) const {
    uint64_t key = FilterKey(address);
    uint64_t part = filter_[ShardIndex(key)].load(std::memory_order_acquire);
    uint64_t bit = FilterBit(key, part);
    auto* words = reinterpret_cast<const std::atomic<uint64_t>*>(part & ~kFilterShiftMask);
    return (words[bit / 64].load(std::memory_order_relaxed) >> (bit % 64)) & 1;
  }

  // kTaken: the block was sampled; it is removed and its size stored in *size. kAbsent: it was
  // not. kBusy: the shard's lock holder never came back (sampled_pointers.cc), so the answer
  // is unknown.
  Lookup Take(uint64_t address, uint64_t* size);

  size_t Count() const;  // entries in all shards; for tests, not synchronized with writers
  // For tests: the bits in an address's shard's part of the filter.
  uint64_t FilterBitsOfShard(uint64_t address) const {
    return uint64_t{1} << FilterLog(filter_[ShardOf(address)].load());
  }
  // For tests: the shard of an address, and its lock taken and given back as an operation does.
  static uint64_t ShardOf(uint64_t address) { return ShardIndex(FilterKey(address)); }
  bool LockShardOf(uint64_t address, uint32_t* seq) { return Lock(shards_[ShardOf(address)], seq); }
  void UnlockShardOf(uint64_t address, uint32_t seq) { Unlock(shards_[ShardOf(address)], seq); }

 private:
  struct Slot {
    std::atomic<uint64_t> address;  // 0: empty (no live block starts at address 0)
    std::atomic<uint64_t> size;
  };
  // A cache line each, so threads working on neighbouring shards do not share one. Every field
  // but `abandoned` is read and written under the lock.
  struct alignas(64) Shard {
    std::atomic<uint32_t> seq{0};  // odd: held
    std::atomic<uint32_t> abandoned{0};  // a held lock word that stayed for kStuckNs (0: none)
    std::atomic<uint64_t> mask{0};  // slots - 1
    std::atomic<Slot*> slots{nullptr};
    uint64_t used = 0;  // under the lock only
    uint8_t* counts = nullptr;  // the filter's counts: one byte per bit of the shard's part
  };
  static_assert(sizeof(Shard) == 64, "a shard per cache line");

  // An address's filter key is one multiplication (Fibonacci hashing), cheap enough for every
  // free; its top bits depend on every address bit. The top six choose the shard, the next
  // log2(bits) the bit in the shard's part of the filter.
  static uint64_t FilterKey(uint64_t address) { return address * 0x9e3779b97f4a7c15ULL; }
  static uint64_t ShardIndex(uint64_t key) { return key >> 58; }
  // A part of the filter is named by one word, so a reader never pairs one part's address with
  // another's size: its address (64-byte aligned) | 64 - log2 of its bits, the shift that
  // leaves a bit index (the shift instruction itself ignores the address bits above).
  static constexpr uint64_t kFilterShiftMask = 63;
  static uint64_t FilterBit(uint64_t key, uint64_t part) {
    return (key << 6) >> (part & kFilterShiftMask);
  }
  static uint64_t FilterLog(uint64_t part) { return 64 - (part & kFilterShiftMask); }
  static uint64_t FilterPart(void* words, uint64_t log_bits) {
    return reinterpret_cast<uintptr_t>(words) | (64 - log_bits);
  }
  static constexpr uint64_t kInitialFilterLog = 10;  // 1,024 bits: 128 bytes a shard
  static constexpr uint64_t kMaxFilterLog = 20;      // 128 KiB + 1 MiB of counts a shard
  // A part grows (x4) once its shard holds a live block per this many bits: about 1.5% of
  // other addresses then find a bit set, 0.4% just after growing. (Beside 1 and 4 GiB live
  // heaps, 64 bits a block was faster than 32 and as fast as 128; 8 was slower still: a false
  // "maybe" costs a lock and a probe of a table too large for the caches.) The counts then
  // take 64 bytes per sampled block, some 0.2% of the heap at the default rate.
  static constexpr uint64_t kFilterBitsPerBlock = 64;
  static constexpr uint8_t kSaturated = 255;
  void CountIntoFilter(Shard& shard, uint64_t key);   // under the shard's lock
  void CountOutOfFilter(Shard& shard, uint64_t key);  // under the shard's lock
  void GrowFilter(Shard& shard, uint64_t shard_index);  // under the shard's lock
  // The home slot in a shard's table, from a hash that mixes high address bits into low ones
  // (the filter key's low bits depend on low address bits only).
  static uint64_t HomeHash(uint64_t address) {
    uint64_t h = address;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 32;
    return h;
  }
  static Slot* MapSlots(uint64_t count);
  // Takes the shard's lock: inline, one compare-and-swap when it is free (nearly always);
  // LockSlow waits, bounded, when it is held.
  bool Lock(Shard& shard, uint32_t* seq) {
    uint32_t s = shard.seq.load(std::memory_order_relaxed);
    if (__builtin_expect(!(s & 1), 1) &&
        shard.seq.compare_exchange_weak(s, s + 1, std::memory_order_acquire,
                                        std::memory_order_relaxed)) {
      *seq = s + 1;
      return true;
    }
    return LockSlow(shard, seq);
  }
  bool LockSlow(Shard& shard, uint32_t* seq);
  static void Unlock(Shard& shard, uint32_t seq) {
    shard.seq.store(seq + 1, std::memory_order_release);
  }
  static bool Grow(Shard& shard);
  static bool Place(Slot* slots, uint64_t mask, uint64_t address, uint64_t size);
  static void EraseAt(Slot* slots, uint64_t mask, uint64_t index);

  // The filter, a part per shard, each written only under its shard's lock. Why a part may be
  // read without the lock: a freeing thread got its block's address through the program's own
  // synchronization after the allocating thread set the bit (in the part current then, which
  // the freeing thread therefore loads or a later one), and a bit is cleared only when its
  // count says no live block holds it, so a clear bit means its block is not in the set.
  // First: every free's load needs no offset.
  alignas(64) std::atomic<uint64_t> filter_[kShards] = {};
  alignas(64) Shard shards_[kShards];
};

}  // namespace memlens::agent
