// The heap grows by 1 MiB every 10 ms for 0.3 s, in blocks never touched (so the resident size
// stays small), and peaks just before exit: the HTML report's timeline has its peak in the top
// right corner of the chart, where its labels must still be readable.
#include <stdlib.h>
#include <time.h>

enum { kMiB = 1 << 20, kBlocks = 30 };

int main(void) {
  void* blocks[kBlocks];
  struct timespec pause = {0, 10 * 1000 * 1000};
  for (int i = 0; i < kBlocks; ++i) {
    blocks[i] = malloc(kMiB);  // @block
    nanosleep(&pause, NULL);
  }
  for (int i = 0; i < kBlocks; ++i) free(blocks[i]);
  return 0;
}
