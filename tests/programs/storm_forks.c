// 200 forks. `storm_forks exit`: each child allocates and ends with a known status, by exit()
// (even children) or _exit() (odd ones). `storm_forks exec`: each child execs this program as
// `storm_forks child I`, which allocates and exits with the same status. The parent allocates
// between forks, waits for every child at the end and prints how each one ended; it keeps the
// blocks of odd forks and frees the others.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { kForks = 200 };

static int status_of(int i) { return (i * 37 + 5) % 256; }

static int child(int i, int use_exit) {
  char* block = malloc(1000 + i);  // @in_child
  if (!block) return 99;
  memset(block, i, 1000 + i);
  if (use_exit) exit(status_of(i));
  _exit(status_of(i));
}

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "child") == 0) return child(atoi(argv[2]), 1);
  if (argc != 2 || (strcmp(argv[1], "exit") != 0 && strcmp(argv[1], "exec") != 0)) {
    fprintf(stderr, "usage: storm_forks exit|exec\n");
    return 2;
  }
  int exec_form = strcmp(argv[1], "exec") == 0;
  static pid_t pids[kForks];
  static char* between[kForks];
  for (int i = 0; i < kForks; ++i) {
    between[i] = malloc(100 + i);  // @between
    memset(between[i], i, 100 + i);
    pids[i] = fork();
    if (pids[i] < 0) {
      perror("fork");
      return 1;
    }
    if (pids[i] == 0) {
      if (!exec_form) child(i, i % 2 == 0);
      char number[16];
      snprintf(number, sizeof number, "%d", i);
      execl("/proc/self/exe", argv[0], "child", number, (char*)NULL);
      _exit(127);
    }
  }
  int as_expected = 0;
  for (int i = 0; i < kForks; ++i) {
    int status;
    if (waitpid(pids[i], &status, 0) != pids[i]) {
      perror("waitpid");
      return 1;
    }
    if (WIFEXITED(status)) {
      printf("child %d exited %d\n", i, WEXITSTATUS(status));
      as_expected += WEXITSTATUS(status) == status_of(i);
    } else {
      printf("child %d ended otherwise (status 0x%x)\n", i, status);
    }
  }
  for (int i = 0; i < kForks; i += 2) free(between[i]);
  printf("%d of %d children exited as expected\n", as_expected, kForks);
  return as_expected == kForks ? 0 : 1;
}
