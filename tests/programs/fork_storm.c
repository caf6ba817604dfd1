// Forks while another thread allocates, as a server forking per request does, for memlens run
// --follow-children with the writer inside the process (a followed descendant):
//   fork_storm N   a thread mallocs and frees without pause; the main thread forks N children
//                  one after another, each of which leaks 500 bytes at @storm_child and exits;
//                  prints "forked N".
// Every fork lands at some moment of the other thread's (and the writer's) work: a lock one of
// them holds at that moment must not hang the child.
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static atomic_int stop;

static void* Churn(void* unused) {
  (void)unused;
  while (!atomic_load(&stop)) {
    char* p = malloc(64 + (rand() & 4095));
    p[0] = 1;
    free(p);
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: fork_storm N\n");
    return 2;
  }
  int n = atoi(argv[1]);
  pthread_t thread;
  pthread_create(&thread, NULL, Churn, NULL);
  for (int i = 0; i < n; ++i) {
    pid_t pid = fork();
    if (pid == 0) {
      char* kept = malloc(500);  // @storm_child
      memset(kept, 1, 500);
      _exit(0);
    }
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "child %d failed\n", i);
      return 1;
    }
  }
  atomic_store(&stop, 1);
  pthread_join(thread, NULL);
  printf("forked %d\n", n);
  return 0;
}
