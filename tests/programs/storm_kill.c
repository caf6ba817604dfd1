// Allocates 100,000 blocks and keeps them, says so, then churns on two threads until it is
// killed from outside; it exits by itself (status 3) after a minute at most. The churn pauses
// 1 ms every 200 blocks, so that a minute of it makes a capture of some 100 MB, not gigabytes.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { kKept = 100000 };

static void* kept[kKept];

static void* churn(void* arg) {
  (void)arg;
  struct timespec pause = {0, 1000000};
  for (unsigned long i = 0;; ++i) {
    char* block = malloc(1 + i % 300);  // @churn
    block[0] = 1;
    free(block);
    if (i % 200 == 199) nanosleep(&pause, NULL);
  }
  return NULL;
}

int main(void) {
  long bytes = 0;
  for (int i = 0; i < kKept; ++i) {
    kept[i] = malloc(16 + i % 64);  // @kept
    bytes += 16 + i % 64;
  }
  printf("allocated %d blocks, %ld bytes\n", kKept, bytes);
  fflush(stdout);
  pthread_t threads[2];
  for (int t = 0; t < 2; ++t) pthread_create(&threads[t], NULL, churn, NULL);
  struct timespec second = {1, 0};
  for (int i = 0; i < 60; ++i) nanosleep(&second, NULL);
  return 3;
}
