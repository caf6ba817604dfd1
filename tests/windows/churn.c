// The churn benchmark (bench/windows_bench.py): STEPS rounds of malloc and free over a window
// of 1000 live blocks of 16 to 1040 bytes, as bench/'s Linux churn does.
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  long steps = argc > 1 ? atol(argv[1]) : 1000000;
  void* window[1000] = {0};
  unsigned state = 12345;
  for (long i = 0; i < steps; ++i) {
    state = state * 1103515245u + 12345u;
    int slot = (state >> 8) % 1000;
    free(window[slot]);
    window[slot] = malloc(16 + (state >> 16) % 1025);
  }
  for (int i = 0; i < 1000; ++i) free(window[i]);
  printf("churned %ld\n", steps);
  return 0;
}
