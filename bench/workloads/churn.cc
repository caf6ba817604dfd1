// bench/workloads/churn.cc
//
// Allocation-heavy churn for the benchmark suite (bench/suite.py).
//
//   churn THREADS ITERATIONS
//
// Each thread keeps a sliding window of live blocks; every step frees the oldest block and
// allocates a new one of 16..4096 bytes through one of four call sites that sit at different
// stack depths (5, 8, 11 and 15 frames below main) and use different allocation functions
// (malloc, calloc, new[], operator new). The sequence is deterministic (fixed-seed xorshift per
// thread). ITERATIONS is the total over all threads, so 1 and 4 threads do the same work.
//
// At exit it prints to stderr the exact number of allocation and free calls it made itself and
// its own peak RSS ("allocs=N frees=N events=N vmhwm_kib=N"); the C++ runtime's own few
// allocations (emergency exception pool, thread state, ...) are not counted.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>
#include <thread>
#include <vector>

#include "peak_rss.h"

namespace {

constexpr int kWindow = 4096;  // live blocks per thread

enum class Kind : uint8_t { kMalloc, kCalloc, kNewArray, kOperatorNew };

struct Block {
  void* ptr = nullptr;
  Kind kind = Kind::kMalloc;
};

// A cache line per thread: the counts of all threads sit in one vector, and without the
// alignment every step's increments bounced one line between the CPUs (false sharing), which
// made the 4-thread run measure that line's traffic more than its allocations.
struct alignas(64) Counts {
  uint64_t allocs = 0;
  uint64_t frees = 0;
};

struct Rng {  // xorshift64
  uint64_t state;
  uint64_t Next() {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  }
};

__attribute__((noinline)) void* Allocate(Kind kind, size_t size) {
  void* p = nullptr;
  switch (kind) {
    case Kind::kMalloc: p = std::malloc(size); break;
    case Kind::kCalloc: p = std::calloc(1, size); break;
    case Kind::kNewArray: p = new char[size]; break;
    case Kind::kOperatorNew: p = ::operator new(size); break;
  }
  static_cast<volatile char*>(p)[size - 1] = 1;  // touch the block
  return p;
}

__attribute__((noinline)) void Release(const Block& block) {
  switch (block.kind) {
    case Kind::kMalloc:
    case Kind::kCalloc: std::free(block.ptr); break;
    case Kind::kNewArray: delete[] static_cast<char*>(block.ptr); break;
    case Kind::kOperatorNew: ::operator delete(block.ptr); break;
  }
}

// Recurses `depth` times before allocating; the asm after the call keeps it from becoming a
// loop, so each level is a real frame.
__attribute__((noinline)) void* Descend(int depth, Kind kind, size_t size) {
  if (depth == 0) return Allocate(kind, size);
  void* p = Descend(depth - 1, kind, size);
  asm volatile("" : : "r"(p) : "memory");
  return p;
}

// One step: free the oldest block of the window, allocate its replacement.
__attribute__((noinline)) void Step(Block& slot, Rng& rng, Counts& counts) {
  if (slot.ptr != nullptr) {
    Release(slot);
    ++counts.frees;
  }
  // Frames from main to Allocate: main, Worker, Step, depth + 1 Descend, Allocate = 5, 8, 11, 15.
  static constexpr int kDepth[4] = {0, 3, 6, 10};
  uint64_t r = rng.Next();
  auto kind = static_cast<Kind>(r & 3);
  size_t size = 16 + (r >> 8) % (4096 - 16 + 1);
  slot.kind = kind;
  slot.ptr = Descend(kDepth[static_cast<int>(kind)], kind, size);
  ++counts.allocs;
}

__attribute__((noinline)) void Worker(int index, uint64_t iterations, Counts* counts) {
  Rng rng{0x9E3779B97F4A7C15ull * (index + 1)};
  std::vector<Block> window(kWindow);
  for (uint64_t i = 0; i < iterations; ++i) Step(window[i % kWindow], rng, *counts);
  for (Block& block : window) {
    if (block.ptr == nullptr) continue;
    Release(block);
    ++counts->frees;
  }
}


}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s THREADS ITERATIONS\n", argv[0]);
    return 2;
  }
  int threads = std::atoi(argv[1]);
  uint64_t iterations = std::strtoull(argv[2], nullptr, 10);
  std::vector<Counts> counts(threads);
  if (threads == 1) {
    Worker(0, iterations, &counts[0]);
  } else {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      uint64_t share = iterations / threads + (t < int(iterations % threads) ? 1 : 0);
      pool.emplace_back(Worker, t, share, &counts[t]);
    }
    for (std::thread& thread : pool) thread.join();
  }
  Counts total;
  for (const Counts& c : counts) {
    total.allocs += c.allocs;
    total.frees += c.frees;
  }
  std::fprintf(stderr, "allocs=%llu frees=%llu events=%llu vmhwm_kib=%ld\n",
               static_cast<unsigned long long>(total.allocs),
               static_cast<unsigned long long>(total.frees),
               static_cast<unsigned long long>(total.allocs + total.frees), PeakRssKib());
  return 0;
}
