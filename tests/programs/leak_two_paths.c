// Leaks exactly 3 + 5 blocks of 100 bytes through one helper called from two places, so the
// two call paths must be told apart; one more block is freed and must not be reported.
#include <stdio.h>
#include <stdlib.h>

void* kept[16];
int kept_count;

void* make_block(size_t n) {
  return malloc(n);  // @make_block
}

void path_a(void) {
  for (int i = 0; i < 3; ++i) kept[kept_count++] = make_block(100);  // @path_a
}

void path_b(void) {
  for (int i = 0; i < 5; ++i) kept[kept_count++] = make_block(100);  // @path_b
}

int main(void) {
  path_a();
  path_b();
  free(make_block(100));  // @freed
  printf("leaked %d blocks\n", kept_count);
  return 0;
}
