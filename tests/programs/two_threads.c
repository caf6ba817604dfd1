// Allocations told apart by thread: the main thread keeps 2 blocks of 5000 bytes, a second
// thread keeps 7 blocks of 3000 bytes and frees, in the main thread, nothing of its own.
// Prints the second thread's OS thread id (the main thread's is the process id).
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void* kept[16];
static long worker_tid;

static void* worker(void* arg) {
  (void)arg;
  worker_tid = gettid();
  for (int i = 0; i < 7; ++i) kept[i] = malloc(3000);  // @worker
  return NULL;
}

int main(void) {
  for (int i = 0; i < 2; ++i) kept[8 + i] = malloc(5000);  // @main
  pthread_t thread;
  pthread_create(&thread, NULL, worker, NULL);
  pthread_join(thread, NULL);
  printf("%ld\n", worker_tid);
  return 0;
}
