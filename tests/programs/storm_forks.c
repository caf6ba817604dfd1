// 200 forks. `storm_forks exit`: each child allocates and ends with a known status, by exit()
// (even children) or _exit() (odd ones). `storm_forks exec`: each child execs this program as
// `storm_forks child I`, which allocates and exits with the same status. The parent allocates
// between forks, waits for every child at the end and prints how each one ended; it keeps the
// blocks of odd forks and frees the others. A second thread allocates all the while, so that
// forks land in the middle of its allocator calls.
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { kForks = 200, kThreadAllocations = 100000 };

static atomic_int forking = 1;

static int status_of(int i) { return (i * 37 + 5) % 256; }

static int child(int i, int use_exit) {
  char* block = malloc(1000 + i);  // @in_child
  if (!block) return 99;
  memset(block, i, 1000 + i);
  if (use_exit) exit(status_of(i));
  _exit(status_of(i));
}

// Allocates and frees until the forks are over, at least kThreadAllocations times (the last
// line says how many: it depends on timing); returns the count through `arg`.
static void* allocate_meanwhile(void* arg) {
  long count = 0;
  while (atomic_load(&forking) || count < kThreadAllocations) {
    char* block = malloc(1 + count % 500);  // @meanwhile
    block[0] = 1;
    free(block);
    ++count;
  }
  *(long*)arg = count;
  return NULL;
}

static long meanwhile_bytes(long count) {
  long bytes = 0;
  for (long i = 0; i < count; ++i) bytes += 1 + i % 500;
  return bytes;
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
  long thread_allocations = 0;
  pthread_t thread;
  if (pthread_create(&thread, NULL, allocate_meanwhile, &thread_allocations) != 0) return 1;
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
  atomic_store(&forking, 0);
  pthread_join(thread, NULL);
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
  printf("meanwhile: %ld blocks, %ld bytes\n", thread_allocations, meanwhile_bytes(thread_allocations));
  return as_expected == kForks ? 0 : 1;
}
