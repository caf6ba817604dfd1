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
// In front of the tables, a filter of 1,024 bits per shard (8 KiB in all, small enough for the
// first- or second-level cache): a bit is set when a sampled block whose address hashes to it
// is inserted. The free of an unsampled block finds its bit clear and stops there, after one
// multiplication and one load, unless a live sampled block shares its bit: with L sampled
// blocks live, a fraction of about L/65,536 of the other frees probe a table for nothing (0.4%
// at the 250 of the churn benchmark, whose 8 MiB heap has some 250 at the default rate). A
// count per bit (one byte each, 64 KiB in all, written under the shard's lock) clears the bit
// with the last live block on it, so removed blocks leave no stale bits behind. (A 4-byte count
// made the array 256 KiB, which missed the cache on every sampled allocation and free; stale
// bits with a rebuild of the shard's words every few removals cost more instructions than a
// byte count, bench/instruction_cost.py.)

// Concurrency: each shard has a lock word (odd while held), taken with a bounded wait by
// the rare calls that get past the filter: a sampled allocation, the free of a sampled block (or
// of one whose filter bit a sampled block shares). The common question, "is this pointer
// sampled?", asked by every free, is the filter's one load and writes nothing shared, so threads
// freeing unsampled blocks never contend. A table that fills past half is replaced by one twice
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
  // for the free of every unsampled block.
  bool MaybeSampled(uint64_t address) const {
    uint64_t key = FilterKey(address);
    return (maybe_[FilterWord(key)].load(std::memory_order_relaxed) >> FilterBit(key)) & 1;
  }

  // kTaken: the block was sampled; it is removed and its size stored in *size. kAbsent: it was
  // not. kBusy: the shard's lock holder never came back (sampled_pointers.cc), so the answer
  // is unknown.
  Lookup Take(uint64_t address, uint64_t* size);

  size_t Count() const;  // entries in all shards; for tests, not synchronized with writers
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
  };
  static_assert(sizeof(Shard) == 64, "a shard per cache line");

  // An address's filter key is one multiplication (Fibonacci hashing), cheap enough for every
  // free; its top bits depend on every address bit. Bits 54..63 choose the filter word, the
  // word's top six its shard, so a shard's 16 words lie side by side (two cache lines, written
  // only under its lock); bits 48..53 choose the bit.
  static constexpr uint64_t kFilterWordsPerShard = 16;
  static uint64_t FilterKey(uint64_t address) { return address * 0x9e3779b97f4a7c15ULL; }
  static uint64_t FilterWord(uint64_t key) { return key >> 54; }
  static uint64_t FilterBit(uint64_t key) { return (key >> 48) % 64; }
  static uint64_t ShardIndex(uint64_t key) { return key >> 58; }
  static_assert(kShards * kFilterWordsPerShard == 1024, "FilterWord takes 10 bits");
  // The home slot in a shard's table, from a hash that mixes high address bits into low ones
  // (the filter key's low bits depend on low address bits only).
  static uint64_t HomeHash(uint64_t address) {
    uint64_t h = address;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 32;
    return h;
  }
  // The filter's counts: one byte per bit, a shard's side by side, like its words.
  static constexpr uint8_t kSaturated = 255;
  static uint64_t FilterCounter(uint64_t key) { return key >> 48; }
  void CountIntoFilter(uint64_t key);   // under the shard's lock
  void CountOutOfFilter(uint64_t key);  // under the shard's lock
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

  // The filter: bit FilterBit(key) of word FilterWord(key), written only under the lock of
  // shard ShardIndex(key). Why it may be read without the lock: a freeing thread got its block's
  // address through the program's own synchronization after the allocating thread set the
  // bit, and a bit is cleared only when its count says no live block holds it, so a clear bit
  // means its block is not in the set. First: every free's load needs no offset.
  alignas(64) std::atomic<uint64_t> maybe_[kShards * kFilterWordsPerShard] = {};
  alignas(64) Shard shards_[kShards];
  uint8_t counts_[kShards * kFilterWordsPerShard * 64] = {};
};

}  // namespace memlens::agent
