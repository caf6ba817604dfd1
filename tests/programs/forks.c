// fork: the child is not recorded (docs/agent.md); the parent's capture goes on.
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

void* before;
void* after;

int main(void) {
  before = malloc(1000);  // @before
  fflush(stdout);
  pid_t child = fork();
  if (child == 0) {
    void* in_child = malloc(2000);  // @in_child
    printf("child %s\n", in_child ? "ok" : "failed");
    exit(0);
  }
  int status;
  waitpid(child, &status, 0);
  after = malloc(3000);  // @after
  printf("parent: child exited %d\n", WEXITSTATUS(status));
  return 0;
}
