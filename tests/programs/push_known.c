// Known allocations spread over time, for `memlens run --push` (tests/e2e/test_push.py):
//   at start           one block of 65536 bytes at startup_block (kept to the end)
//   every TICK_MS ms   one block of 1000 bytes at keep_block (kept), one of 4096 bytes at
//                      churn_block (freed at once); TICKS times
// Usage: push_known TICKS TICK_MS. Prints "done" on stdout and exits 3 (a status the test
// checks passes through); writes "elapsed_ms N" on stderr, its own run time.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void* kept[100000];

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

void* startup_block(void) {
  return memset(malloc(65536), 1, 65536);  // @startup
}

void* keep_block(void) {
  return memset(malloc(1000), 2, 1000);  // @keep
}

void churn_block(void) {
  char* p = malloc(4096);  // @churn
  memset(p, 3, 4096);
  free(p);
}

int main(int argc, char** argv) {
  int ticks = argc > 1 ? atoi(argv[1]) : 30;
  int tick_ms = argc > 2 ? atoi(argv[2]) : 100;
  if (ticks < 0 || ticks > 100000) return 1;
  double start = now_ms();
  void* first = startup_block();
  for (int i = 0; i < ticks; ++i) {
    kept[i] = keep_block();
    churn_block();
    usleep(tick_ms * 1000);
  }
  fprintf(stderr, "elapsed_ms %.0f\n", now_ms() - start);
  printf("done\n");
  return first ? 3 : 4;
}
