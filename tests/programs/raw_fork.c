// A child made by _Fork(), which runs no fork handlers (the agent's pthread_atfork included):
// the child allocates 100 blocks of 777 bytes and leaves with _exit; then the parent allocates
// 10 blocks of 555 bytes. Only the parent is recorded, and whole.
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void) {
  pid_t pid = _Fork();
  if (pid == 0) {
    for (int i = 0; i < 100; ++i) free(malloc(777));  // @child
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  void* blocks[10];
  for (int i = 0; i < 10; ++i) blocks[i] = malloc(555);  // @parent
  for (int i = 0; i < 10; ++i) free(blocks[i]);
  printf("child %d\n", WEXITSTATUS(status));
  return 0;
}
