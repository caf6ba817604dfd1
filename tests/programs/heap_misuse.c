/* Misuse of the instrumentation API's custom heaps, one of each kind the analyzer reports as an
 * anomaly, each at a marked line; the program must run to the end (never fatal). Written in C:
 * memlens.h is a C header too. */
#include <stdio.h>
#include <stdlib.h>

#include "memlens/memlens.h"

int main(void) {
  char* pool = malloc(1024);
  memlens_heap* heap = memlens_heap_create("Blocks");
  memlens_heap_alloc(heap, pool, 64);
  memlens_heap_free(heap, pool);
  memlens_heap_free(heap, pool);  // @double_free
  memlens_heap_free(heap, pool + 512);  // @unknown_free
  memlens_heap_alloc(heap, pool + 64, 32);
  memlens_heap_reset(heap);
  memlens_heap_free(heap, pool + 64);  // @after_reset
  memlens_heap* twin = memlens_heap_create("Blocks");  // @name_reused
  memlens_heap_alloc(twin, pool + 128, 16);
  memlens_heap_destroy(twin);
  memlens_heap_free(twin, pool + 128);  // @after_destroy
  memlens_heap_destroy(heap);
  free(pool);
  printf("done %d\n", memlens_is_recording());
  return 0;
}
