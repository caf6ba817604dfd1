// Starts four child processes (three forks, one posix_spawn), none of them recorded, and waits
// for each: the summary must count exactly four.
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

int main(void) {
  void* kept = malloc(100);  // @kept
  for (int i = 0; i < 3; ++i) {
    pid_t pid = fork();
    if (pid == 0) _exit(0);
    waitpid(pid, NULL, 0);
  }
  pid_t pid;
  char* argv[] = {"true", NULL};
  if (posix_spawnp(&pid, "true", NULL, NULL, argv, environ) == 0) waitpid(pid, NULL, 0);
  printf("started 4 children\n");
  return kept ? 0 : 1;
}
