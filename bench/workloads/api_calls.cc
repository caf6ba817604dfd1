// bench/workloads/api_calls.cc: the per-call cost of the instrumentation API
// (include/memlens/memlens.h), next to a malloc+free pair, in whatever state the process runs
// in (no agent; agent present but not recording; recording). Run by bench/api_bench.py.
//
// For each operation: 5 batches of N calls, each timed with CLOCK_MONOTONIC; prints the median
// batch's nanoseconds per operation: "op=NAME ns=X".
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "memlens/memlens.h"

namespace {

struct Foo {
  char bytes[64];
};

double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

template <typename Fn>
void Measure(const char* name, long n, Fn&& fn) {
  std::vector<double> batches;
  for (int b = 0; b < 5; ++b) {
    double start = Now();
    for (long i = 0; i < n; ++i) {
      fn(i);
      asm volatile("" ::: "memory");  // every call happens, in order
    }
    batches.push_back((Now() - start) / n);
  }
  std::sort(batches.begin(), batches.end());
  std::printf("op=%s ns=%.3f\n", name, batches[2]);
}

}  // namespace

int main(int argc, char** argv) {
  long n = argc > 1 ? std::atol(argv[1]) : 200000;
  static Foo slots[256];
  memlens_heap* heap = memlens_heap_create("bench");
  Measure("marker", n, [](long) { memlens_add_marker("tick", nullptr); });
  Measure("heap_alloc+free", n, [&](long i) {
    Foo* p = &slots[i & 255];
    memlens_heap_alloc(heap, p, sizeof(Foo));
    memlens_heap_free(heap, p);
  });
  Measure("heap_alloc_typed+free", n, [&](long i) {
    Foo* p = &slots[i & 255];
    memlens_heap_alloc_typed(heap, p, sizeof(Foo), memlens::TypeName<Foo>());
    memlens_heap_free(heap, p);
  });
  Measure("malloc+free", n, [](long i) {
    void* volatile p = std::malloc(64 + (i & 7));
    std::free(p);
  });
  memlens_heap_destroy(heap);
  return 0;
}
