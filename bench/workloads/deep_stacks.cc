// bench/workloads/deep_stacks.cc
//
// Deep C++ call stacks for the overhead benchmark (bench/run.py).
//
//   deep_stacks THREADS ITERATIONS
//
// Each thread repeatedly descends a recursion 50..200 frames deep (drawn per descent) and
// allocates on the way down, every 25 levels and at the bottom, so consecutive allocations
// share most of their stack with the previous one, and each new descent changes it from near
// the top. Every allocation frees the oldest block of a 4096-block sliding window, so the heap
// stays small. ITERATIONS is the total number of allocations over all threads. Deterministic
// (fixed-seed xorshift per thread).
//
// At exit it prints to stderr the exact number of allocation and free calls it made itself and
// its own peak RSS ("allocs=N frees=N events=N vmhwm_kib=N"), like churn.cc.
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "peak_rss.h"

namespace {

constexpr int kWindow = 4096;

// A cache line per thread (the states of all threads sit in one vector): no false sharing.
struct alignas(64) State {
  uint64_t rng;
  uint64_t left;  // allocations still to make
  uint64_t allocs = 0;
  uint64_t frees = 0;
  size_t next = 0;
  std::vector<char*> window = std::vector<char*>(kWindow, nullptr);

  uint64_t Next() {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
  }
};

__attribute__((noinline)) void AllocateOne(State& s) {
  char*& slot = s.window[s.next++ % kWindow];
  if (slot) {
    delete[] slot;
    ++s.frees;
  }
  size_t size = 16 + s.Next() % 1024;
  slot = new char[size];
  slot[size - 1] = 1;
  ++s.allocs;
  --s.left;
}

// One frame per level; the asm after the call keeps it from becoming a loop.
__attribute__((noinline)) void Descend(State& s, int level) {
  if (s.left == 0) return;
  if (level % 25 == 0) AllocateOne(s);
  if (level == 0 || s.left == 0) return;
  Descend(s, level - 1);
  asm volatile("" : : "r"(&s) : "memory");
}

__attribute__((noinline)) void Worker(int index, uint64_t iterations, State* s) {
  s->rng = 0x9E3779B97F4A7C15ull * (index + 1);
  s->left = iterations;
  while (s->left > 0) Descend(*s, 50 + static_cast<int>(s->Next() % 151));
  for (char* block : s->window) {
    if (!block) continue;
    delete[] block;
    ++s->frees;
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
  std::vector<State> states(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    uint64_t share = iterations / threads + (t < int(iterations % threads) ? 1 : 0);
    if (threads == 1) {
      Worker(0, share, &states[0]);
    } else {
      pool.emplace_back(Worker, t, share, &states[t]);
    }
  }
  for (std::thread& thread : pool) thread.join();
  uint64_t allocs = 0, frees = 0;
  for (const State& s : states) {
    allocs += s.allocs;
    frees += s.frees;
  }
  std::fprintf(stderr, "allocs=%llu frees=%llu events=%llu vmhwm_kib=%ld\n",
               static_cast<unsigned long long>(allocs), static_cast<unsigned long long>(frees),
               static_cast<unsigned long long>(allocs + frees), PeakRssKib());
  return 0;
}
