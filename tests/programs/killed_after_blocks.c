// Allocates 1,000 blocks of 96 bytes at one line, says "ready" at once (before the in-process
// writer's next flush), then waits to be killed: under the hosted writer the capture holds every
// one of them, and an END record that names the SIGKILL.
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void* kept[1000];

int main(void) {
  for (int i = 0; i < 1000; ++i) kept[i] = malloc(96);  // @blocks
  printf("ready\n");
  fflush(stdout);
  for (int i = 0; i < 600; ++i) usleep(100000);  // a minute at most
  return 0;
}
