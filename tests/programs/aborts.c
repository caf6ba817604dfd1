// Allocates, then aborts: the capture must keep what happened before SIGABRT.
#include <stdio.h>
#include <stdlib.h>

void* kept;

int main(void) {
  kept = malloc(777);  // @before_abort
  printf("about to abort\n");
  fflush(stdout);
  abort();
}
