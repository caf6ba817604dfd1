// One leaked block from each allocation function but malloc, each on its own line.
#define _GNU_SOURCE
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>

int main(void) {
  void* blocks[8];
  blocks[0] = calloc(10, 100);                      // @calloc 1000 bytes
  posix_memalign(&blocks[1], 64, 1000);             // @posix_memalign 1000 bytes
  blocks[2] = aligned_alloc(4096, 8192);            // @aligned_alloc 8192 bytes
  blocks[3] = memalign(256, 300);                   // @memalign 300 bytes
  blocks[4] = valloc(5000);                         // @valloc 5000 bytes
  blocks[5] = pvalloc(5000);                        // @pvalloc rounded up to 8192 bytes
  blocks[6] = reallocarray(NULL, 7, 10);            // @reallocarray 70 bytes
  for (int i = 0; i < 7; ++i) printf("%d:%s ", i, blocks[i] ? "ok" : "null");
  printf("\n");
  return 0;
}
