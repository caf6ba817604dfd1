// A block grown by realloc from 16 to 4096 bytes (8 reallocs), realloc(NULL) as malloc,
// realloc(p, 0) as free, and a realloc that fails and leaves its block alive.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(void) {
  char* p = malloc(16);  // @first
  for (size_t size = 32; size <= 4096; size *= 2) {
    p = realloc(p, size);  // @grow
  }
  char* q = realloc(NULL, 100);  // @realloc_null
  q = realloc(q, 0);             // frees q (glibc), returns NULL
  char* survivor = malloc(50);   // @survivor
  char* failed = realloc(survivor, SIZE_MAX / 2);  // fails: survivor stays allocated
  printf("%d %d %d\n", p != NULL, q == NULL, failed == NULL);
  return 0;
}
