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
  static constexpr uint64_t kInitialSlots = 256;  // per shard: one 4 KiB page

  enum class Lookup { kAbsent, kTaken, kBusy };

  // Maps every shard's first table. Returns false when the memory cannot be mapped. Once,
  // before any other call.
  bool Init();

  // Remembers a sampled block (overwriting a stale entry at the same address). Returns false
  // when the shard stayed locked past the bound or no memory could be mapped: the caller drops
  // the event.
  bool Insert(uint64_t address, uint64_t size);

  // kTaken: the block was sampled; it is removed and its size stored in *size. kAbsent: it was
  // not. kBusy: the shard stayed locked past the bound, so the answer is unknown.
  Lookup Take(uint64_t address, uint64_t* size);

  size_t Count() const;  // entries in all shards; for tests, not synchronized with writers

 private:
  struct Slot {
    std::atomic<uint64_t> address;  // 0: empty (no live block starts at address 0)
    std::atomic<uint64_t> size;
  };
  struct Table {
    uint64_t mask;  // slots - 1; immutable once published
    uint64_t used;  // written under the shard lock only
    Slot* slots() { return reinterpret_cast<Slot*>(this + 1); }
  };
  struct alignas(64) Shard {
    std::atomic<uint32_t> seq{0};  // odd: a writer holds the shard
    std::atomic<Table*> table{nullptr};
  };

  static uint64_t Hash(uint64_t address);
  static Table* NewTable(uint64_t slots);
  bool Lock(Shard& shard, uint32_t* seq);
  static void Unlock(Shard& shard, uint32_t seq);
  static bool Grow(Shard& shard);
  static void Place(Table* table, uint64_t address, uint64_t size, uint64_t hash);
  static void EraseAt(Table* table, uint64_t index);

  Shard shards_[kShards];
};

}  // namespace memlens::agent
