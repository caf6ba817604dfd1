// A peak before a marker and a smaller one after it, for `memlens blocks --peak-since-marker`
// (tests/e2e/test_tracemalloc_api.py): 100,000 bytes allocated and freed, the marker "reset",
// then 30,000 bytes kept and 20,000 allocated and freed. The peak since the marker is what is in
// use at the end plus 20,000; the whole capture's is 70,000 more.
#include <stdlib.h>

#include "memlens/memlens.h"

void* volatile sink;

int main(void) {
  sink = malloc(100000);  // @before
  free(sink);
  memlens_add_marker("reset", NULL);
  void* kept = malloc(30000);  // @kept
  sink = malloc(20000);        // @after
  free(sink);
  sink = kept;
  return 0;
}
