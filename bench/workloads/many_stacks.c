// bench/workloads/many_stacks.c: many distinct call stacks, for bench/report_bench.py and
// the suite (bench/suite.py; Debian's heaptrack 1.4 does not survive it).
//
// usage: many_stacks PATHS ALLOCATIONS
// Each allocation is made at the bottom of a recursion 18 calls deep whose path is chosen by
// the bits of a path number: at every level one of two call sites is taken, so path numbers
// 0..PATHS-1 give PATHS distinct stacks (PATHS <= 2^18). ALLOCATIONS allocations in all (each
// freed later but the last 5%), so the capture holds about 2 x ALLOCATIONS events. The live
// set grows for the first half of the run and shrinks after it, so the timeline has a shape.
// Build without optimisation of the call structure: -O0 -fno-omit-frame-pointer -fno-inline.
//
// At exit it prints to stderr the exact number of allocation and free calls it made itself and
// its own peak RSS ("allocs=N frees=N events=N vmhwm_kib=N"), like churn.cc.
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "peak_rss.h"

enum { kDepth = 18 };

static void* Leaf(uint32_t path, size_t size) {
  char* p = malloc(size);
  if (p) p[0] = (char)path;
  return p;
}

static void* Step(int depth, uint32_t path, uint32_t bits, size_t size) {
  if (depth == 0) return Leaf(path, size);
  if (bits & 1) return Step(depth - 1, path, bits >> 1, size + 1);  // one call site
  return Step(depth - 1, path, bits >> 1, size);                     // the other
}


int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: many_stacks PATHS ALLOCATIONS\n");
    return 2;
  }
  uint32_t paths = (uint32_t)strtoul(argv[1], NULL, 10);
  uint64_t allocations = strtoull(argv[2], NULL, 10);
  if (paths == 0 || paths > (1u << kDepth)) return 2;
  uint64_t window = allocations / 20 + 1;  // live blocks at most
  void** ring = calloc(window, sizeof(void*));
  uint64_t rng = 88172645463325252ull, held = 0, frees = 0;
  for (uint64_t i = 0; i < allocations; ++i) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    uint32_t path = (uint32_t)(i < paths ? i : rng % paths);  // every path at least once
    size_t size = 16u << (rng >> 40) % 8;
    // The window of live blocks widens to its full size by mid-run, then narrows.
    uint64_t want = i < allocations / 2 ? window * i / (allocations / 2 + 1) + 1
                                        : window * (allocations - i) / (allocations / 2 + 1) + 1;
    uint64_t slot = i % window;
    if (ring[slot]) {
      free(ring[slot]);
      ring[slot] = NULL;
      --held;
      ++frees;
    }
    void* block = Step(kDepth, path, path, size);  // one call site: PATHS stacks in all
    if (held < want || i >= allocations - allocations / 20) {
      ring[slot] = block;
      ++held;
    } else {
      free(block);  // made and dropped at once
      ++frees;
    }
  }
  printf("%llu allocations over %u paths, %llu blocks left\n", (unsigned long long)allocations,
         paths, (unsigned long long)held);
  uint64_t allocs = allocations + 1;  // and the ring
  fprintf(stderr, "allocs=%llu frees=%llu events=%llu vmhwm_kib=%ld\n",
          (unsigned long long)allocs, (unsigned long long)frees,
          (unsigned long long)(allocs + frees), PeakRssKib());
  return 0;
}
