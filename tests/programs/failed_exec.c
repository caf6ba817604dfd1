// An exec that fails (no such program) must leave recording on: both blocks are recorded.
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void* kept[2];

int main(void) {
  kept[0] = malloc(1234);  // @before
  char* args[] = {"nope", NULL};
  execv("/does/not/exist", args);
  kept[1] = malloc(4321);  // @after
  printf("still here\n");
  return 0;
}
