// Allocates, then execs another program: the new image is followed into the same capture,
// whose analysis describes the last image (the shell) and names this one.
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void* kept;

int main(int argc, char** argv) {
  kept = malloc(500);  // @before_exec
  fflush(stdout);
  char* args[] = {"sh", "-c", "echo exec-ed; exit 4", NULL};
  execv("/bin/sh", args);
  perror("execv");
  return 1;
}
