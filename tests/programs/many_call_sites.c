// Allocations from 6,144 distinct call sites on 4 threads at once: more return addresses than
// one thread's cache of unwinding rules holds (4,096 slots), so every thread keeps going to the
// process-wide table behind it (src/agent/recorder/unwinder.cc), filling and reading it at the
// same time as the others.
//
// Each thread walks all call sites 8 times; every Leaf call allocates 32 bytes and frees them,
// except in the last walk, which keeps them: at exit each call site has leaked 4 blocks (one
// per thread), 128 bytes, through Leaf <- Walk (at one of the six @walk_K lines) <- Worker.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

enum { kThreads = 4, kRounds = 8, kBlock = 32 };

pthread_barrier_t g_start;

__attribute__((noinline)) void Leaf(int keep) {
  void* block = malloc(kBlock);  // @leaf
  if (!keep) free(block);
}

// Each C1 is a call instruction of its own, hence a return address of its own.
#define C1 Leaf(keep);
#define C4 C1 C1 C1 C1
#define C16 C4 C4 C4 C4
#define C64 C16 C16 C16 C16
#define C256 C64 C64 C64 C64
#define C1024 C256 C256 C256 C256

__attribute__((noinline)) void Walk(int keep) {
  C1024  // @walk_0
  C1024  // @walk_1
  C1024  // @walk_2
  C1024  // @walk_3
  C1024  // @walk_4
  C1024  // @walk_5
}

void* Worker(void* arg) {
  (void)arg;
  pthread_barrier_wait(&g_start);  // all threads meet the new call sites at once
  for (int round = 0; round < kRounds; ++round) Walk(round == kRounds - 1);  // @worker
  return NULL;
}

int main(void) {
  pthread_t threads[kThreads];
  pthread_barrier_init(&g_start, NULL, kThreads);
  for (int i = 0; i < kThreads; ++i) pthread_create(&threads[i], NULL, Worker, NULL);
  for (int i = 0; i < kThreads; ++i) pthread_join(threads[i], NULL);
  printf("ok\n");
  return 0;
}
