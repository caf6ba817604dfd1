// Phase one holds 10 blocks of 1 MiB at once (the peak); phase two holds 3 blocks of 2 MiB.
// Everything is freed before exit.
#include <stdlib.h>
#include <string.h>

enum { kMiB = 1 << 20 };

void phase_one(void) {
  void* blocks[10];
  for (int i = 0; i < 10; ++i) {
    blocks[i] = malloc(kMiB);  // @phase_one
    memset(blocks[i], 1, kMiB);
  }
  for (int i = 0; i < 10; ++i) free(blocks[i]);
}

void phase_two(void) {
  void* blocks[3];
  for (int i = 0; i < 3; ++i) blocks[i] = malloc(2 * kMiB);  // @phase_two
  for (int i = 0; i < 3; ++i) free(blocks[i]);
}

int main(void) {
  phase_one();
  phase_two();
  return 0;
}
