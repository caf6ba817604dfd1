// Known bytes at known stacks for `memlens export` (tests/e2e/test_exports.py), 300 ms between
// the steps so that the writer's time marks see each level:
//   main -> churn_blocks:  5 blocks of 7,000 bytes, each freed at once  (35,000 allocated)
//   marker "kept"
//   main -> keep_path -> keep_blocks: 4 blocks of 3,000 bytes, kept      (12,000 in use at exit)
//   main -> big_block: one block of 50,000 bytes, freed 300 ms later     (the peak: 62,000)
//   snapshot request "after"
#include <stdlib.h>
#include <unistd.h>

#include "memlens/memlens.h"

void* kept[4];

void churn_blocks(void) {
  for (int i = 0; i < 5; ++i) free(malloc(7000));  // @churn
}

void keep_blocks(void) {
  for (int i = 0; i < 4; ++i) kept[i] = malloc(3000);  // @keep
}

void keep_path(void) { keep_blocks(); }

void big_block(void) {
  void* big = malloc(50000);  // @big
  usleep(300000);
  free(big);
}

int main(void) {
  churn_blocks();
  usleep(300000);
  memlens_add_marker("kept", "phase");
  keep_path();
  usleep(300000);
  big_block();
  memlens_take_snapshot("after");
  usleep(300000);
  return 0;
}
