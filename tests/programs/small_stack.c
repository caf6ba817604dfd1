// Allocations on a thread with the smallest stack pthreads allows (PTHREAD_STACK_MIN, 16 KiB
// here), as coroutine libraries use: the agent's hot path must fit in what is left of it.
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

void* kept[100];

void* work(void* arg) {
  for (int i = 0; i < 100; ++i) kept[i] = malloc(100);  // @small_stack
  return NULL;
}

int main(void) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, PTHREAD_STACK_MIN);
  pthread_t thread;
  if (pthread_create(&thread, &attr, work, NULL) != 0) return 1;
  pthread_join(thread, NULL);
  printf("ok\n");
  return 0;
}
