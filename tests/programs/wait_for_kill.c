// Allocates, says "ready", then waits to be killed (SIGKILL: no chance to flush anything).
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void* kept;

int main(void) {
  kept = malloc(888);  // @before_kill
  printf("ready\n");
  fflush(stdout);
  for (int i = 0; i < 600; ++i) usleep(100000);  // a minute at most
  return 0;
}
