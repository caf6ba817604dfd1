// Allocation churn on THREADS threads (argument, default 1), 250,000 steps each: every step
// frees the oldest of a 4,096-block window and allocates 16..4,095 bytes. At exit it prints the
// exact allocations and frees it made and its own peak resident memory (VmHWM, which under
// memlens run includes the agent's rings, writer and buffers):
// "allocs=N frees=N vmhwm_kib=N". The resident-memory test runs it with and without memlens.
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kWindow = 4096, kSteps = 250000, kMaxThreads = 8 };

static void* Churn(void* arg) {
  uint32_t state = 12345u + (uint32_t)(uintptr_t)arg;
  void** window = calloc(kWindow, sizeof(void*));  // @window
  for (int i = 0; i < kSteps; ++i) {
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    free(window[i % kWindow]);                         // NULL for the first kWindow steps
    window[i % kWindow] = malloc(16 + state % 4080);  // @step
  }
  for (int i = 0; i < kWindow; ++i) free(window[i]);
  free(window);
  return NULL;
}

static long PeakRssKib(void) {
  char text[4096];
  FILE* f = fopen("/proc/self/status", "r");
  long kib = -1;
  if (!f) return kib;
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = '\0';
  const char* line = strstr(text, "VmHWM:");
  if (line) kib = strtol(line + 6, NULL, 10);
  return kib;
}

int main(int argc, char** argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 1;
  if (threads < 1 || threads > kMaxThreads) return 2;
  pthread_t ids[kMaxThreads];
  for (int t = 0; t < threads; ++t) pthread_create(&ids[t], NULL, Churn, (void*)(uintptr_t)t);
  for (int t = 0; t < threads; ++t) pthread_join(ids[t], NULL);
  // Per thread: the window, kSteps blocks; frees: kSteps - kWindow + kWindow blocks and the
  // window (free(NULL) is no call the agent records, and is not counted).
  long long allocs = (long long)threads * (kSteps + 1);
  long long frees = (long long)threads * (kSteps + 1);
  fprintf(stderr, "allocs=%lld frees=%lld vmhwm_kib=%ld\n", allocs, frees, PeakRssKib());
  return 0;
}
