// tests/programs/attach_target.c: a native "server" for `memlens attach` (tests/e2e/
// test_attach.py). It allocates two blocks at start (before any attach), prints "ready", then
// serves commands read from stdin, one per line, each answered on stdout:
//   work  allocate 3 blocks of 10,000 bytes kept (keep_blocks), one of 5,000 freed at once
//         (temporary_block), and free the blocks of the start (once)
//   quit  free everything, print a checksum of what was kept, exit 0
// Its output depends on nothing but its input, so a run attached and detached can be compared
// byte for byte with one that was not.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kMaxKept = 64 };
static char* kept[kMaxKept];
static int kept_count;
static char* from_start[2];

static void start_blocks(void) {
  from_start[0] = malloc(7000);  // @start_block
  from_start[1] = malloc(7000);
  memset(from_start[0], 1, 7000);
  memset(from_start[1], 2, 7000);
}

static void keep_blocks(void) {
  for (int i = 0; i < 3 && kept_count < kMaxKept; ++i) {
    char* block = malloc(10000);  // @keep_block
    memset(block, kept_count + 1, 10000);
    kept[kept_count++] = block;
  }
}

static void temporary_block(void) {
  char* block = malloc(5000);  // @temporary_block
  memset(block, 7, 5000);
  free(block);
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  start_blocks();
  printf("ready\n");
  char line[64];
  while (fgets(line, sizeof line, stdin)) {
    if (strcmp(line, "work\n") == 0) {
      keep_blocks();
      temporary_block();
      free(from_start[0]);
      free(from_start[1]);
      from_start[0] = from_start[1] = NULL;
      printf("worked %d\n", kept_count);
    } else if (strcmp(line, "quit\n") == 0) {
      unsigned long sum = 0;
      for (int i = 0; i < kept_count; ++i) {
        for (int j = 0; j < 10000; j += 100) sum += (unsigned char)kept[i][j];
        free(kept[i]);
      }
      printf("bye %lu\n", sum);
      return 0;
    } else {
      printf("unknown command\n");
    }
  }
  return 3;  // stdin closed before quit
}
