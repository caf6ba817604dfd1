// src/agent/recorder/sampled_pointers.cc: see sampled_pointers.h. Allocation hot path.
#include "agent/recorder/sampled_pointers.h"

#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <new>

namespace memlens::agent {
namespace {

// Bounded waits: spin briefly (the holder is a few instructions from done), then yield the CPU
// (the holder may have been preempted, or be mapping a bigger table), then give up.
constexpr int kSpins = 128;
constexpr int kAttempts = 512;

void Backoff(int attempt) {
  if (attempt < kSpins) {
    __builtin_ia32_pause();
  } else {
    sched_yield();
  }
}

}  // namespace

uint64_t SampledPointers::Hash(uint64_t address) {
  uint64_t h = address;
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 32;
  return h;
}

SampledPointers::Table* SampledPointers::NewTable(uint64_t slots) {
  size_t bytes = sizeof(Table) + slots * sizeof(Slot);
  // The raw system call: neither our mmap hook nor any allocator. Zeroed: every slot empty.
  void* mem = reinterpret_cast<void*>(syscall(SYS_mmap, nullptr, bytes, PROT_READ | PROT_WRITE,
                                              MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
  if (mem == MAP_FAILED) return nullptr;
  auto* table = new (mem) Table{slots - 1, 0};
  return table;
}

bool SampledPointers::Init() {
  for (Shard& shard : shards_) {
    Table* table = NewTable(kInitialSlots);
    if (!table) return false;
    shard.table.store(table, std::memory_order_release);
  }
  return true;
}

bool SampledPointers::Lock(Shard& shard, uint32_t* seq) {
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    uint32_t s = shard.seq.load(std::memory_order_relaxed);
    if (!(s & 1) &&
        shard.seq.compare_exchange_weak(s, s + 1, std::memory_order_acquire,
                                        std::memory_order_relaxed)) {
      // The odd sequence becomes visible before any slot changes (the seqlock writer's side).
      std::atomic_thread_fence(std::memory_order_release);
      *seq = s + 1;
      return true;
    }
    Backoff(attempt);
  }
  return false;
}

void SampledPointers::Unlock(Shard& shard, uint32_t seq) {
  shard.seq.store(seq + 1, std::memory_order_release);
}

void SampledPointers::Place(Table* table, uint64_t address, uint64_t size, uint64_t hash) {
  Slot* slots = table->slots();
  uint64_t i = (hash >> 6) & table->mask;
  for (;;) {
    uint64_t a = slots[i].address.load(std::memory_order_relaxed);
    if (a == address || a == 0) {
      if (a == 0) ++table->used;
      slots[i].size.store(size, std::memory_order_relaxed);
      slots[i].address.store(address, std::memory_order_relaxed);
      return;
    }
    i = (i + 1) & table->mask;
  }
}

bool SampledPointers::Grow(Shard& shard) {
  Table* old = shard.table.load(std::memory_order_relaxed);
  Table* table = NewTable((old->mask + 1) * 2);
  if (!table) return false;
  Slot* slots = old->slots();
  for (uint64_t i = 0; i <= old->mask; ++i) {
    uint64_t a = slots[i].address.load(std::memory_order_relaxed);
    if (a != 0) Place(table, a, slots[i].size.load(std::memory_order_relaxed), Hash(a));
  }
  shard.table.store(table, std::memory_order_release);
  return true;
}

// Backward shift: later members of the probe run move into the hole when that brings them no
// further from their home slot, so lookups can stop at the first empty slot.
void SampledPointers::EraseAt(Table* table, uint64_t index) {
  Slot* slots = table->slots();
  const uint64_t mask = table->mask;
  uint64_t hole = index;
  for (uint64_t j = (index + 1) & mask;; j = (j + 1) & mask) {
    uint64_t a = slots[j].address.load(std::memory_order_relaxed);
    if (a == 0) break;
    uint64_t home = (Hash(a) >> 6) & mask;
    if (((j - home) & mask) >= ((j - hole) & mask)) {
      slots[hole].size.store(slots[j].size.load(std::memory_order_relaxed),
                             std::memory_order_relaxed);
      slots[hole].address.store(a, std::memory_order_relaxed);
      hole = j;
    }
  }
  slots[hole].address.store(0, std::memory_order_relaxed);
  --table->used;
}

bool SampledPointers::Insert(uint64_t address, uint64_t size) {
  const uint64_t hash = Hash(address);
  Shard& shard = shards_[hash % kShards];
  uint32_t seq;
  if (!Lock(shard, &seq)) return false;
  Table* table = shard.table.load(std::memory_order_relaxed);
  if ((table->used + 1) * 2 > table->mask + 1) {  // keep runs short: at most half full
    if (!Grow(shard)) {
      Unlock(shard, seq);
      return false;
    }
    table = shard.table.load(std::memory_order_relaxed);
  }
  Place(table, address, size, hash);
  Unlock(shard, seq);
  return true;
}

SampledPointers::Lookup SampledPointers::Take(uint64_t address, uint64_t* size) {
  const uint64_t hash = Hash(address);
  Shard& shard = shards_[hash % kShards];
  // Optimistic read: nothing shared is written, so frees of unsampled blocks on many threads
  // never bounce a cache line between them.
  bool found = false;
  int attempt = 0;
  for (;; ++attempt) {
    if (attempt == kAttempts) return Lookup::kBusy;
    uint32_t before = shard.seq.load(std::memory_order_acquire);
    if (before & 1) {
      Backoff(attempt);
      continue;
    }
    Table* table = shard.table.load(std::memory_order_acquire);
    Slot* slots = table->slots();
    found = false;
    uint64_t i = (hash >> 6) & table->mask;
    for (uint64_t n = 0; n <= table->mask; ++n, i = (i + 1) & table->mask) {
      uint64_t a = slots[i].address.load(std::memory_order_relaxed);
      if (a == address) found = true;
      if (a == address || a == 0) break;
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if (shard.seq.load(std::memory_order_relaxed) == before) break;
    Backoff(attempt);
  }
  if (!found) return Lookup::kAbsent;
  // Only the block's owner frees it, so it is still there; remove it under the lock.
  uint32_t seq;
  if (!Lock(shard, &seq)) return Lookup::kBusy;
  Table* table = shard.table.load(std::memory_order_relaxed);
  Slot* slots = table->slots();
  Lookup result = Lookup::kAbsent;
  uint64_t i = (hash >> 6) & table->mask;
  for (uint64_t n = 0; n <= table->mask; ++n, i = (i + 1) & table->mask) {
    uint64_t a = slots[i].address.load(std::memory_order_relaxed);
    if (a == 0) break;
    if (a == address) {
      *size = slots[i].size.load(std::memory_order_relaxed);
      EraseAt(table, i);
      result = Lookup::kTaken;
      break;
    }
  }
  Unlock(shard, seq);
  return result;
}

size_t SampledPointers::Count() const {
  size_t total = 0;
  for (const Shard& shard : shards_) total += shard.table.load(std::memory_order_acquire)->used;
  return total;
}

}  // namespace memlens::agent
