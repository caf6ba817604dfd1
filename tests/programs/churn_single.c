// A first phase whose capture fills a pipe, a pause for the writer to flush it, then far more
// events than one thread buffer holds: the test that stalls the writer sees the overflow
// dropped and counted, never a hang. Pseudo-random sizes and a sliding window of live blocks
// keep the capture from compressing to nothing. 400000 malloc/free pairs in all.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

enum { kWindow = 4096 };
static void* window[kWindow];
static uint32_t state = 12345;

static void step(int i) {
  state ^= state << 13;
  state ^= state >> 17;
  state ^= state << 5;
  free(window[i % kWindow]);
  window[i % kWindow] = malloc(16 + state % 4000);  // @step
}

int main(void) {
  for (int i = 0; i < 100000; ++i) step(i);
  usleep(300000);
  for (int i = 100000; i < 400000; ++i) step(i);
  for (int i = 0; i < kWindow; ++i) free(window[i]);
  printf("done\n");
  return 0;
}
