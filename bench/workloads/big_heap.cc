// bench/workloads/big_heap.cc: allocation churn beside a large live heap, for
// bench/sampling_bench.py. Under sampling, every free asks the filter of sampled blocks
// (src/agent/recorder/sampled_pointers.h) whether its block was sampled; the more sampled
// blocks live, the more bits that filter has set, so this is where a filter that does not grow
// with the heap shows.
//
// usage: big_heap LIVE_MIB STEPS
// Allocates LIVE_MIB MiB in 4 KiB blocks and keeps them (at the default rate about 30,000
// sampled blocks a GiB), then makes STEPS steps, each freeing the oldest block of a 4096-slot
// window and allocating 16..255 bytes in its place, then frees everything.
//
// At exit it prints to stderr the exact number of allocation and free calls it made itself, its
// own peak RSS and the churn phase's wall time ("allocs=N frees=N events=N vmhwm_kib=N
// churn_s=S"), since building and freeing the heap are not what is measured.
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "peak_rss.h"

namespace {

volatile uint64_t g_sink;  // keeps the blocks' writes from being optimised away

double Now() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: big_heap LIVE_MIB STEPS\n");
    return 2;
  }
  const long live_blocks = std::atol(argv[1]) * 256;
  const long steps = std::atol(argv[2]);
  long allocs = 0, frees = 0;
  std::vector<char*> live(static_cast<size_t>(live_blocks));  // before counting: one allocation
  for (char*& block : live) {
    block = static_cast<char*>(std::malloc(4096));
    block[0] = 1;
    ++allocs;
  }
  constexpr long kWindow = 4096;
  static char* window[kWindow];
  uint64_t x = 88172645463325252ULL, sum = 0;
  const double start = Now();
  for (long i = 0; i < steps; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    char*& slot = window[i % kWindow];
    if (slot) {
      std::free(slot);
      ++frees;
    }
    slot = static_cast<char*>(std::malloc(16 + (x >> 20) % 240));
    ++allocs;
    slot[0] = static_cast<char>(i);
    sum += reinterpret_cast<uintptr_t>(slot) & 1;
  }
  const double churn = Now() - start;
  g_sink = sum;
  for (char* block : window) {
    if (block) {
      std::free(block);
      ++frees;
    }
  }
  for (char* block : live) {
    std::free(block);
    ++frees;
  }
  std::fprintf(stderr, "allocs=%ld frees=%ld events=%ld vmhwm_kib=%ld churn_s=%.4f\n", allocs,
               frees, allocs + frees, PeakRssKib(), churn);
  return 0;
}
