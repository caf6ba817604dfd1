// memlens.h on Windows: a pool of its own (64 KiB from malloc) whose blocks the program tells
// memlens about: 10 blocks of 100 bytes typed "node" (4 freed), one untyped block of 2000,
// a marker between the two phases, then the pool reset.
#include <stdio.h>
#include <stdlib.h>

#include "memlens/memlens.h"

int main(void) {
  char* pool = malloc(64 << 10);  // @pool
  memlens_heap* heap = memlens_heap_create("pool");  // @create
  char* next = pool;
  for (int i = 0; i < 10; ++i, next += 100) {
    memlens_heap_alloc_typed(heap, next, 100, "node");  // @nodes
  }
  for (int i = 0; i < 4; ++i) memlens_heap_free(heap, pool + 100 * i);
  memlens_add_marker("nodes_done", "phase");
  memlens_heap_alloc(heap, next, 2000);  // @big
  printf("recording %d\n", memlens_is_recording());
  memlens_flush();
  memlens_heap_reset(heap);
  memlens_heap_alloc(heap, pool, 300);  // @after_reset
  return memlens_start(NULL) == -1 ? 0 : 1;
}
