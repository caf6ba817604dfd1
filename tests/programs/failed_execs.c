// Three execs in a row that fail after the agent paused the writer for each (argv[1]: an
// executable file that is no program, ENOEXEC), a block of 100 bytes before each: recording
// goes on, and each exec's pause is over as soon as the writer has honoured it. Prints how long
// the three took, in milliseconds.
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

void* kept[3];

static long now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  long start = now_ms();
  char* args[] = {argv[1], NULL};
  for (int i = 0; i < 3; ++i) {
    kept[i] = malloc(100);  // @before_exec
    execv(argv[1], args);
  }
  printf("%ld\n", now_ms() - start);
  return 0;
}
