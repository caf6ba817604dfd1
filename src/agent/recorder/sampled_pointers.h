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
// In front of the tables, a filter of 64 bits per shard (512 bytes in all, so it stays in cache):
// a bit is set while some sampled block whose address hashes to it is live. Most frees find
// their bit clear and stop there, after one load; the others probe their shard's table.
//
// Concurrency: each shard has one sequence word that is both a writer's spin lock (odd while a
// writer holds it) and a seqlock for readers. Writers (a sampled allocation, the free of a
// sampled block: rare by construction) take it with a bounded try-lock. The common question,
// "is this pointer sampled?", asked by every free, is answered without writing anything shared:
// the reader probes optimistically and checks that the sequence word did not move, so threads
// freeing unsampled blocks never contend. A table that fills past half is replaced by one twice
// its size; the old one is never unmapped (a reader may still be probing it), which costs at
// most as much memory again as the current tables.
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
  // when the shard stayed locked past the bound or no memory could be mapped: the caller drops
  // the event.
  bool Insert(uint64_t address, uint64_t size);

  // False when the block at address is certainly not in the set: the filter's answer, inline
  // for the free of every unsampled block.
  bool MaybeSampled(uint64_t address) const {
    uint64_t hash = Hash(address);
    return (maybe_[hash % kShards].load(std::memory_order_relaxed) >> (hash >> 58)) & 1;
  }

  // kTaken: the block was sampled; it is removed and its size stored in *size. kAbsent: it was
  // not. kBusy: the shard stayed locked past the bound, so the answer is unknown.
  Lookup Take(uint64_t address, uint64_t* size);

  size_t Count() const;  // entries in all shards; for tests, not synchronized with writers

 private:
  struct Slot {
    std::atomic<uint64_t> address;  // 0: empty (no live block starts at address 0)
    std::atomic<uint64_t> size;
  };
  // 32 bytes: a free of an unsampled block reads one shard line and one slot line. A table that
  // grows gets its slots first and its mask after (both under the lock), so a reader that sees
  // a mask always probes slots at least that large.
  struct Shard {
    std::atomic<uint32_t> seq{0};  // odd: a writer holds the shard
    std::atomic<uint64_t> mask{0};  // slots - 1
    std::atomic<Slot*> slots{nullptr};
    uint64_t used = 0;  // under the lock only
  };
  static_assert(sizeof(Shard) == 32, "two shards per cache line");

  static uint64_t Hash(uint64_t address) {
    uint64_t h = address;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 32;
    return h;
  }
  void Track(uint64_t hash, int delta);  // the count and filter bit of a block, +1 or -1
  static Slot* MapSlots(uint64_t count);
  bool Lock(Shard& shard, uint32_t* seq);
  static void Unlock(Shard& shard, uint32_t seq);
  static bool Grow(Shard& shard);
  static bool Place(Slot* slots, uint64_t mask, uint64_t address, uint64_t size, uint64_t hash);
  static void EraseAt(Slot* slots, uint64_t mask, uint64_t index);

  alignas(64) Shard shards_[kShards];
  // The filter: bit (hash >> 58) of word (hash % kShards), written only under that shard's lock.
  // Why it may be read without the lock: a freeing thread got its block's address through the
  // program's own synchronization after the allocating thread set the bit, so a clear bit means
  // its block is not in the set.
  alignas(64) std::atomic<uint64_t> maybe_[kShards] = {};
  uint32_t live_[kShards][64] = {};  // sampled blocks per filter bit
};

}  // namespace memlens::agent
