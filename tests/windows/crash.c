// Allocates 3 blocks of 512 bytes, then writes through a null pointer: an access violation no
// handler catches. The capture must hold the blocks, and end with the exception.
#include <stdio.h>
#include <stdlib.h>

void* volatile kept;  // so that the compiler keeps each malloc

int main(void) {
  for (int i = 0; i < 3; ++i) kept = malloc(512);  // @before_crash
  printf("crashing\n");
  fflush(stdout);
  *(volatile int*)0 = 1;
  return 0;
}
