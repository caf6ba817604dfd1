// Leaks through one helper called from two places: 3 blocks of 1000 bytes from main's first
// call site, 5 blocks of 2000 from the second; one more block of 4096 is freed.
#include <stdio.h>
#include <stdlib.h>

static void* keep(size_t bytes) {
  return malloc(bytes);  // @helper
}

int main(void) {
  for (int i = 0; i < 3; ++i) keep(1000);  // @first
  for (int i = 0; i < 5; ++i) keep(2000);  // @second
  void* freed = malloc(4096);  // @freed
  free(freed);
  printf("leaked\n");
  return 0;
}
