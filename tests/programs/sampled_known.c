// Known allocations for the sampling-mode tests (tests/e2e/test_sampling.py): estimates from a
// sampled capture are compared with these exact figures.
//
//   big:    1 GiB in 64 KiB blocks, 2048 live at a time; the last 2048 (128 MiB) never freed
//   small:  100 MB in 32-byte blocks (3,125,000), all live at once (the peak), then 1 in 4 freed:
//           75 MB never freed
//   medium: 20 MiB in 4 KiB blocks, each freed at once
//   small_index: the 25 MB array of the small blocks' pointers, never freed
// Peak: 128 MiB of big + 25 MB of index + 100 MB of small. At exit: the same, less 25 MB of
// small.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kBigSize = 64 * 1024, kBigCount = 16384, kBigWindow = 2048 };
enum { kSmallSize = 32, kSmallCount = 3125000 };
enum { kMediumSize = 4096, kMediumCount = 5120 };

static void* big_block(void) {
  void* p = malloc(kBigSize);  // @big
  memset(p, 1, 64);
  return p;
}

static void** big(void) {
  static void* window[kBigWindow];
  for (int i = 0; i < kBigCount; ++i) {
    if (i >= kBigWindow) free(window[i % kBigWindow]);
    window[i % kBigWindow] = big_block();
  }
  return window;
}

static void** small(void) {
  void** blocks = malloc(kSmallCount * sizeof(void*));  // @small_index
  for (int i = 0; i < kSmallCount; ++i) {
    blocks[i] = malloc(kSmallSize);  // @small
    memset(blocks[i], 2, kSmallSize);
  }
  for (int i = 0; i < kSmallCount; i += 4) free(blocks[i]);
  return blocks;
}

static void medium(void) {
  for (int i = 0; i < kMediumCount; ++i) {
    char* p = malloc(kMediumSize);  // @medium
    p[0] = 3;
    free(p);
  }
}

int main(void) {
  void** kept_big = big();
  void** kept_small = small();
  medium();
  printf("%p %p\n", (void*)kept_big, (void*)kept_small);
  return 0;
}
