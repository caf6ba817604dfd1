// 8 threads, each with its own glibc arena, for `memlens rss`'s per-arena figures
// (tests/e2e/test_rss.py).
//   Thread t (0..7) allocates 80,000 blocks of 100 bytes (8,000,000 bytes) from its own thread,
//   then frees those whose index j has j % 10 <= t: thread 0 keeps 72,000 blocks, thread 7
//   keeps 16,000. The threads start one after another, each once the one before has made its
//   first malloc, so that each gets an arena of its own, made in thread order (glibc makes an
//   arena for a thread's first malloc while there are fewer than M_ARENA_MAX; its default, 8 per
//   core, would leave 7 thread arenas on a 1-core machine: mallopt raises it to 16).
//   The pointers sit in a static array (bss), not in any arena.
// All wait at a barrier; main reads malloc_info(0, ...) (one <heap nr=N> per arena: main's is
// 0, then the newest first), sleeps ~350 ms (the agent reads the mappings at most every
// 100 ms), drops the marker "arenas" and prints one JSON line:
//   {"threads":[{"thread":t,"heap_start":"0x...","in_use_bytes":...,"blocks":...,
//                "heap_nr":N,"system_bytes":...,"fast_bytes":...,"rest_bytes":...,
//                "free_bytes":fast+rest}, ...]}
// heap_start: the 64 MiB-aligned start of the thread's heap (its blocks' address rounded down).
// A thread's heap is matched to its malloc_info entry by the in-use bytes (system minus free,
// nearest to the thread's kept chunks), and the program exits with 1 if that is not the
// creation order.
// The test checks: 8 thread arenas, each with in_use_bytes and blocks exactly the thread's,
// and free_bytes within 2% of fast+rest (glibc counts the <= 7 chunks per size in each
// thread's tcache, and the tcache itself, as in use; memlens counts them free).
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memlens/memlens.h"

enum { kThreads = 8, kBlocks = 80000, kBlockBytes = 100, kChunkBytes = 112 };
#define kHeapMax ((uintptr_t)64 << 20)  // HEAP_MAX_SIZE on 64-bit: thread heaps are aligned to it

static void* blocks[kThreads][kBlocks];
static pthread_barrier_t done, leave;
static sem_t started;

struct heap {
  long nr, system, fast, rest;
};

static long kept_blocks(int t) {
  long kept = 0;
  for (long j = 0; j < kBlocks; ++j) kept += j % 10 > t;
  return kept;
}

static void* worker(void* arg) {
  int t = (int)(intptr_t)arg;
  blocks[t][0] = malloc(kBlockBytes);  // @thread_blocks (the first: makes the arena)
  sem_post(&started);
  for (long j = 1; j < kBlocks; ++j) blocks[t][j] = malloc(kBlockBytes);  // @thread_blocks
  for (long j = 0; j < kBlocks; ++j) {
    if (j % 10 <= t) {
      free(blocks[t][j]);
      blocks[t][j] = NULL;
    }
  }
  pthread_barrier_wait(&done);
  pthread_barrier_wait(&leave);
  return NULL;
}

// The <heap nr=...> entries of malloc_info's XML.
static int parse_heaps(const char* xml, struct heap* heaps, int most) {
  int n = 0;
  const char* tag = "<heap nr=\"";
  for (const char* p = strstr(xml, tag); p && n < most; p = strstr(p + 1, tag)) {
    struct heap* h = &heaps[n++];
    h->nr = strtol(p + 10, NULL, 10);
    const char* fast = strstr(p, "<total type=\"fast\"");
    const char* rest = strstr(p, "<total type=\"rest\"");
    const char* system = strstr(p, "<system type=\"current\"");
    if (!fast || !rest || !system) return -1;
    h->fast = strtol(strstr(fast, "size=\"") + 6, NULL, 10);
    h->rest = strtol(strstr(rest, "size=\"") + 6, NULL, 10);
    h->system = strtol(strstr(system, "size=\"") + 6, NULL, 10);
  }
  return n;
}

int main(void) {
  static char out_buffer[1 << 16];
  setvbuf(stdout, out_buffer, _IOFBF, sizeof out_buffer);
  mallopt(M_ARENA_MAX, 16);
  sem_init(&started, 0, 0);
  pthread_barrier_init(&done, NULL, kThreads + 1);
  pthread_barrier_init(&leave, NULL, kThreads + 1);
  pthread_t threads[kThreads];
  for (int t = 0; t < kThreads; ++t) {
    pthread_create(&threads[t], NULL, worker, (void*)(intptr_t)t);
    sem_wait(&started);
  }
  pthread_barrier_wait(&done);

  static char xml[1 << 20];
  FILE* f = fmemopen(xml, sizeof xml - 1, "w");
  malloc_info(0, f);
  fclose(f);
  struct heap heaps[64];
  int count = parse_heaps(xml, heaps, 64);
  if (count != kThreads + 1) {
    fprintf(stderr, "malloc_info lists %d heaps, not %d:\n%s", count, kThreads + 1, xml);
    return 1;
  }

  usleep(350000);
  memlens_add_marker("arenas", "rss");

  printf("{\"threads\":[");
  for (int t = 0; t < kThreads; ++t) {
    long kept = kept_blocks(t), best = -1;
    for (int h = 1; h < count; ++h) {  // the nearest in use; heap 0 is the main arena
      long in_use = heaps[h].system - heaps[h].fast - heaps[h].rest;
      long best_in_use = best < 0 ? 0 : heaps[best].system - heaps[best].fast - heaps[best].rest;
      if (best < 0 || labs(in_use - kept * kChunkBytes) < labs(best_in_use - kept * kChunkBytes))
        best = h;
    }
    if (heaps[best].nr != kThreads - t) {
      fprintf(stderr, "thread %d: its arena is heap %ld, not %d\n", t, heaps[best].nr,
              kThreads - t);
      return 1;
    }
    printf("%s{\"thread\":%d,\"heap_start\":\"0x%lx\",\"in_use_bytes\":%ld,\"blocks\":%ld,"
           "\"heap_nr\":%ld,\"system_bytes\":%ld,\"fast_bytes\":%ld,\"rest_bytes\":%ld,"
           "\"free_bytes\":%ld}",
           t ? "," : "", t, (unsigned long)((uintptr_t)blocks[t][kBlocks - 1] & ~(kHeapMax - 1)),
           kept * kBlockBytes, kept, heaps[best].nr, heaps[best].system, heaps[best].fast,
           heaps[best].rest, heaps[best].fast + heaps[best].rest);
  }
  printf("]}\n");
  fflush(stdout);

  pthread_barrier_wait(&leave);
  for (int t = 0; t < kThreads; ++t) pthread_join(threads[t], NULL);
  return 0;
}
