// 16 threads x 1,000,000 allocator calls each, all at once: a seeded mix of malloc, free and
// realloc of known sizes. Each thread counts what it did; the program prints the totals (the
// same on every run), and every block is freed before the threads end.
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

enum { kThreads = 16, kOperations = 1000000, kSlots = 256 };

struct Counts {
  long mallocs, malloc_bytes, reallocs, realloc_bytes, frees;
};

static struct Counts counts[kThreads];
static pthread_barrier_t start_together;

static uint64_t next_random(uint64_t* state) {  // xorshift64
  *state ^= *state << 13;
  *state ^= *state >> 7;
  *state ^= *state << 17;
  return *state;
}

static void* storm(void* arg) {
  long index = (long)arg;
  struct Counts* c = &counts[index];
  uint64_t state = 0x9e3779b97f4a7c15ull * (uint64_t)(index + 1);
  unsigned char* slots[kSlots] = {0};
  pthread_barrier_wait(&start_together);
  for (long i = 0; i < kOperations; ++i) {
    uint64_t r = next_random(&state);
    unsigned slot = r % kSlots;
    size_t size = 1 + (r >> 8) % 2048;
    if (!slots[slot]) {
      slots[slot] = malloc(size);  // @storm_malloc
      slots[slot][0] = (unsigned char)i;
      ++c->mallocs;
      c->malloc_bytes += size;
    } else if ((r >> 24) % 4 == 0) {
      unsigned char* grown = realloc(slots[slot], size);  // @storm_realloc
      if (!grown) abort();
      slots[slot] = grown;
      ++c->reallocs;
      c->realloc_bytes += size;
      ++c->frees;  // the old block
    } else {
      free(slots[slot]);
      slots[slot] = NULL;
      ++c->frees;
    }
  }
  for (int s = 0; s < kSlots; ++s) {
    if (slots[s]) {
      free(slots[s]);
      ++c->frees;
    }
  }
  return NULL;
}

int main(void) {
  pthread_t threads[kThreads];
  pthread_barrier_init(&start_together, NULL, kThreads);
  for (long t = 0; t < kThreads; ++t) {
    if (pthread_create(&threads[t], NULL, storm, (void*)t) != 0) return 1;
  }
  struct Counts total = {0};
  for (int t = 0; t < kThreads; ++t) {
    pthread_join(threads[t], NULL);
    total.mallocs += counts[t].mallocs;
    total.malloc_bytes += counts[t].malloc_bytes;
    total.reallocs += counts[t].reallocs;
    total.realloc_bytes += counts[t].realloc_bytes;
    total.frees += counts[t].frees;
  }
  printf("threads %d operations %ld\n", kThreads, (long)kThreads * kOperations);
  printf("mallocs %ld malloc_bytes %ld\n", total.mallocs, total.malloc_bytes);
  printf("reallocs %ld realloc_bytes %ld\n", total.reallocs, total.realloc_bytes);
  printf("frees %ld\n", total.frees);
  return 0;
}
