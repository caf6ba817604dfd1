// Starts child processes every way a program does, for memlens run --follow-children:
//   spawns N       leaks 1000 bytes, then starts N children by fork and exec of itself, one by
//                  posix_spawn, one through system() (a shell that runs it), and one fork that
//                  runs no other program; waits for each, prints "spawned N+3".
//   spawns child K leaks 100 * K bytes and exits.
// Each child K leaks exactly 100 * K bytes at @child_block, its parent 1000 at @parent_block.
// The parent also holds 3000 bytes at @lent_block while its children start (freed at its end).
// The forked child that does not exec inherits both blocks, frees the 3000, and leaks 7777
// bytes at @forked_only: in use at its exit, 1000 + 7777.
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

static void Wait(pid_t pid) {
  int status;
  while (waitpid(pid, &status, 0) < 0) {}
}

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "child") == 0) {
    int k = atoi(argv[2]);
    char* block = malloc(100 * (size_t)k);  // @child_block
    memset(block, 1, 100 * (size_t)k);
    return 0;
  }
  if (argc != 2) {
    fprintf(stderr, "usage: spawns N | spawns child K\n");
    return 2;
  }
  int n = atoi(argv[1]);
  char* kept = malloc(1000);  // @parent_block
  memset(kept, 1, 1000);
  char* lent = malloc(3000);  // @lent_block
  memset(lent, 1, 3000);
  char number[32];
  for (int k = 1; k <= n; ++k) {
    pid_t pid = fork();
    if (pid == 0) {
      snprintf(number, sizeof number, "%d", k);
      execl("/proc/self/exe", argv[0], "child", number, (char*)NULL);
      _exit(127);
    }
    Wait(pid);
  }
  snprintf(number, sizeof number, "%d", n + 1);
  char* spawn_argv[] = {argv[0], "child", number, NULL};
  pid_t pid;
  if (posix_spawn(&pid, "/proc/self/exe", NULL, NULL, spawn_argv, environ) == 0) Wait(pid);
  char command[4096];
  snprintf(command, sizeof command, "'%s' child %d", argv[0], n + 2);
  if (system(command) != 0) return 1;
  pid = fork();
  if (pid == 0) {
    free(lent);
    char* forked = malloc(7777);  // @forked_only
    memset(forked, 1, 7777);
    _exit(kept[0] == 1 ? 0 : 1);
  }
  Wait(pid);
  free(lent);
  printf("spawned %d\n", n + 3);
  return 0;
}
