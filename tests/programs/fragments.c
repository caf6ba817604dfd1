// A heap layout known at every moment, for the report's memory-map playback
// (tests/report/playback.test.mjs). 65 blocks of 16 KiB are allocated one after the other in the
// main arena (below glibc's mmap threshold: heap blocks, one chunk header apart), then the heap
// is holed in two steps, each phase held 400 ms so that frames of the playback land inside it:
//   "filled"  all 65 blocks live                  -> gaps of one chunk header
//   "holes"   every odd block freed               -> gaps of one block and two headers
//   "hollow"  the even blocks 10..40 freed too    -> one gap of about half a MiB
// The first and the last block stay live, so the region's ends never move. A 4 MiB block
// allocated first and freed once the 65 are in leaves a gap over 1 MiB between them and
// whatever the runtime allocated before main: they are a region of their own.
//
// Prints one JSON line per phase, computed from its own pointers: {"phase", "begin", "end",
// "in_use_bytes", "blocks", "largest_gap"} (begin and end as numbers), each after its marker.
// Prints with write(2) from a stack buffer, and stdout unbuffered, so that stdio allocates
// nothing near the blocks.
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memlens/memlens.h"

enum { kBlocks = 65, kSize = 16 * 1024 };
static char* blocks[kBlocks];

// The live blocks' figures, as memlens's address map computes them for their region.
static void Report(const char* phase) {
  uintptr_t begin = 0, end = 0, gap = 0, last_end = 0;
  int live = 0;
  for (int i = 0; i < kBlocks; ++i) {  // allocated at increasing addresses (checked below)
    if (!blocks[i]) continue;
    uintptr_t a = (uintptr_t)blocks[i];
    if (live == 0) begin = a;
    if (live && a - last_end > gap) gap = a - last_end;
    last_end = end = a + kSize;
    ++live;
  }
  char line[256];
  int n = snprintf(line, sizeof line,
                   "{\"phase\": \"%s\", \"begin\": %lu, \"end\": %lu, \"in_use_bytes\": %lu, "
                   "\"blocks\": %d, \"largest_gap\": %lu}\n",
                   phase, (unsigned long)begin, (unsigned long)end,
                   (unsigned long)live * kSize, live, (unsigned long)gap);
  if (write(1, line, n) != n) exit(1);
}

static void Phase(const char* name) {
  memlens_add_marker(name, NULL);
  Report(name);
  usleep(400000);
}

void fill(void) {
  for (int i = 0; i < kBlocks; ++i) {
    blocks[i] = malloc(kSize);  // @fill
    memset(blocks[i], i, kSize);
  }
}

int main(void) {
  setvbuf(stdout, NULL, _IONBF, 0);
  mallopt(M_MMAP_THRESHOLD, 64 << 20);  // the spacer too comes from the heap
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
  char* spacer = malloc(4 << 20);
  memset(spacer, 1, 4 << 20);
  fill();
  free(spacer);
  for (int i = 1; i < kBlocks; ++i) {
    if (blocks[i] <= blocks[i - 1]) {
      fprintf(stderr, "fragments: block %d lies below block %d\n", i, i - 1);
      return 1;
    }
  }
  Phase("filled");
  for (int i = 1; i < kBlocks; i += 2) {
    free(blocks[i]);
    blocks[i] = NULL;
  }
  Phase("holes");
  for (int i = 10; i <= 40; i += 2) {
    free(blocks[i]);
    blocks[i] = NULL;
  }
  Phase("hollow");
  return 0;
}
