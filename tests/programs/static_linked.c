// Linked statically (tests/CMakeLists.txt): the loader never runs, so LD_PRELOAD cannot bring
// the agent in. It prints and exits 5, exactly as it would without memlens.
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  char* block = malloc(32);
  printf("static %s\n", argc > 1 ? argv[1] : "");
  free(block);
  return 5;
}
