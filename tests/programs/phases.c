// Three phases 300 ms apart, so that a snapshot at a time inside each is unambiguous:
//   0.0 s  10 blocks of 1 MiB at @phase_a (kept)          -> 10 MiB in use
//   0.3 s  20 blocks of 1 MiB at @phase_b (kept)          -> 30 MiB in use: the peak
//   0.6 s  the phase A blocks are freed                   -> 20 MiB in use
//   0.9 s  exit, the phase B blocks still allocated
// Prints "a", "b", "c" as each phase ends (the test waits for nothing: times are fixed).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { kMiB = 1 << 20 };
void* a[10];
void* b[20];

void phase_a(void) {
  for (int i = 0; i < 10; ++i) memset(a[i] = malloc(kMiB), 1, kMiB);  // @phase_a
}

void phase_b(void) {
  for (int i = 0; i < 20; ++i) memset(b[i] = malloc(kMiB), 2, kMiB);  // @phase_b
}

int main(void) {
  phase_a();
  usleep(300000);
  phase_b();
  usleep(300000);
  for (int i = 0; i < 10; ++i) free(a[i]);
  usleep(300000);
  printf("done\n");
  return 0;
}
