// Allocates, then execs another program: the capture ends at the exec (end reason "exec") and
// the new image is not recorded.
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
