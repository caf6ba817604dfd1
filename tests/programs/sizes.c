// Allocation sizes in known log2 buckets, each at its own marked line: 300 blocks of 24 bytes
// (bucket [16, 32)), 200 of 1000 bytes ([512, 1024)) and 50 of 70000 bytes ([65536, 131072)).
// Everything is freed before exit.
#include <stdlib.h>

static void* blocks[550];

int main(void) {
  int n = 0;
  for (int i = 0; i < 300; ++i) blocks[n++] = malloc(24);  // @small
  for (int i = 0; i < 200; ++i) blocks[n++] = malloc(1000);  // @medium
  for (int i = 0; i < 50; ++i) blocks[n++] = malloc(70000);  // @large
  for (int i = 0; i < n; ++i) free(blocks[i]);
  return 0;
}
