// 520 threads alive at once, more than the hosted writer's 512 rings (exchange.h): each makes
// and frees 100 blocks of 64 bytes while all the others are alive, so some threads find no ring
// and their events are left out; the capture must count them as dropped.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

enum { kThreads = 520, kBlocks = 100 };
static pthread_barrier_t g_all_alive, g_all_done, g_all_freed;

static void* work(void* arg) {
  (void)arg;
  void* blocks[kBlocks];
  pthread_barrier_wait(&g_all_alive);
  for (int i = 0; i < kBlocks; ++i) blocks[i] = malloc(64);  // @work
  pthread_barrier_wait(&g_all_done);  // no thread exits (freeing its ring) before all have one
  for (int i = 0; i < kBlocks; ++i) free(blocks[i]);
  // Nor before all have freed: an exited thread's ring goes to the next thread without one,
  // whose frees would then be recorded (of blocks whose allocations were left out).
  pthread_barrier_wait(&g_all_freed);
  return NULL;
}

int main(void) {
  static pthread_t threads[kThreads];
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 << 10);
  pthread_barrier_init(&g_all_alive, NULL, kThreads);
  pthread_barrier_init(&g_all_done, NULL, kThreads);
  pthread_barrier_init(&g_all_freed, NULL, kThreads);
  for (int i = 0; i < kThreads; ++i) pthread_create(&threads[i], &attr, work, NULL);
  for (int i = 0; i < kThreads; ++i) pthread_join(threads[i], NULL);
  printf("done\n");
  return 0;
}
