// Says "ready", waits for a line on stdin (the test kills memlens run meanwhile), then asks for
// three flushes of the capture (memlens_flush: a wait for the writer) and prints how long they
// took, in milliseconds: with its writer gone, the program must not wait for it.
#include <stdio.h>
#include <time.h>

#include "memlens/memlens.h"

static long now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

int main(void) {
  printf("ready\n");
  fflush(stdout);
  char line[16];
  if (!fgets(line, sizeof line, stdin)) return 1;
  long start = now_ms();
  for (int i = 0; i < 3; ++i) memlens_flush();
  printf("%ld\n", now_ms() - start);
  return 0;
}
