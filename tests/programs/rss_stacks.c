// 20 threads with 8 MiB stacks, each touching 1 MiB of it, for `memlens rss`'s stacks part,
// exact to the page (tests/e2e/test_rss.py).
//   Each thread is made with pthread_attr_setstacksize(8 MiB): glibc (2.36) maps 8 MiB and a
//   guard page (PROT_NONE) below them, the thread's descriptor and TLS at the top. The
//   thread writes every page of a 1 MiB array on its stack, then waits at a barrier inside that
//   function (so nothing of its stack changes until it is let go).
// Main, once all 20 wait, reads its own /proc/self/smaps twice (the first reading's stack and
// allocations settle before the second, reported one): each thread's stack mapping, found by
// the address of a local of that thread, the mapping just below it (the guard) and main's
// [stack]; sleeps ~350 ms (the agent reads the mappings at most every 100 ms), drops the marker
// "stacks", prints one JSON line, and lets the threads go:
//   {"threads":20,"stack_size":8388608,"touched_bytes":1048576,"page_bytes":4096,
//    "thread_rss_bytes":...,"thread_virtual_bytes":...,"guard_bytes":...,
//    "main_stack_rss_bytes":...,"main_stack_virtual_bytes":...,
//    "stacks":[{"start":"0x...","end":"0x...","rss_bytes":...}, ...]}
// The test checks: the mappings pieces in part stacks are exactly these 21 mappings, their
// resident bytes sum to thread_rss_bytes + main_stack_rss_bytes, the threads' virtual bytes sum
// to thread_virtual_bytes (20 x 8 MiB), and the guards (guard_bytes) are in part reserved.
// A real run: each thread's stack 258 pages resident (the 256 written, the top two: the
// descriptor, TLS and first frames).
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memlens/memlens.h"

enum { kThreads = 20, kStackBytes = 8 << 20, kTouchedBytes = 1 << 20 };

static pthread_barrier_t touched, leave;
static uintptr_t local_address[kThreads];

struct mapping {
  unsigned long start, end, rss_kb;
  char perms[8];
  int is_stack;  // named [stack]
};
static struct mapping maps[4096];
static int map_count;

static void touch_and_wait(int t) {
  volatile char stack_array[kTouchedBytes];
  for (long i = 0; i < kTouchedBytes; i += 4096) stack_array[i] = 1;
  stack_array[kTouchedBytes - 1] = 1;
  local_address[t] = (uintptr_t)&stack_array[0];
  pthread_barrier_wait(&touched);
  pthread_barrier_wait(&leave);
}

static void* worker(void* arg) {
  touch_and_wait((int)(intptr_t)arg);
  return NULL;
}

static int read_maps(void) {
  FILE* f = fopen("/proc/self/smaps", "r");
  if (!f) return -1;
  static char line[4096];
  map_count = 0;
  struct mapping* m = NULL;
  while (fgets(line, sizeof line, f)) {
    unsigned long start, end;
    char perms[8];
    if (sscanf(line, "%lx-%lx %7s", &start, &end, perms) == 3) {  // a mapping's first line
      if (map_count == 4096) return -1;
      m = &maps[map_count++];
      memset(m, 0, sizeof *m);
      m->start = start;
      m->end = end;
      strcpy(m->perms, perms);
      m->is_stack = strstr(line, "[stack]") != NULL;
    } else if (m) {
      sscanf(line, "Rss: %lu kB", &m->rss_kb);
    }
  }
  fclose(f);
  return 0;
}

static int mapping_of(uintptr_t address) {
  for (int i = 0; i < map_count; ++i)
    if (address >= maps[i].start && address < maps[i].end) return i;
  return -1;
}

int main(void) {
  static char out_buffer[1 << 16];
  setvbuf(stdout, out_buffer, _IOFBF, sizeof out_buffer);
  memlens_is_recording();  // looks the API up now: no dlsym deeper in main's stack later
  pthread_barrier_init(&touched, NULL, kThreads + 1);
  pthread_barrier_init(&leave, NULL, kThreads + 1);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, kStackBytes);
  pthread_t threads[kThreads];
  for (int t = 0; t < kThreads; ++t)
    if (pthread_create(&threads[t], &attr, worker, (void*)(intptr_t)t) != 0) return 1;
  pthread_barrier_wait(&touched);

  if (read_maps() != 0 || read_maps() != 0) return 1;
  long page = sysconf(_SC_PAGESIZE);
  unsigned long thread_rss = 0, thread_virtual = 0, guard = 0, main_rss = 0, main_virtual = 0;
  int stack_index[kThreads];
  for (int t = 0; t < kThreads; ++t) {
    int i = stack_index[t] = mapping_of(local_address[t]);
    if (i <= 0 || maps[i - 1].end != maps[i].start || strcmp(maps[i - 1].perms, "---p") != 0) {
      fprintf(stderr, "thread %d: no stack mapping with a guard below it\n", t);
      return 1;
    }
    thread_rss += maps[i].rss_kb * 1024;
    thread_virtual += maps[i].end - maps[i].start;
    guard += maps[i - 1].end - maps[i - 1].start;
  }
  for (int i = 0; i < map_count; ++i) {
    if (maps[i].is_stack) {
      main_rss = maps[i].rss_kb * 1024;
      main_virtual = maps[i].end - maps[i].start;
    }
  }

  usleep(350000);
  memlens_add_marker("stacks", "rss");

  printf("{\"threads\":%d,\"stack_size\":%d,\"touched_bytes\":%d,\"page_bytes\":%ld,"
         "\"thread_rss_bytes\":%lu,\"thread_virtual_bytes\":%lu,\"guard_bytes\":%lu,"
         "\"main_stack_rss_bytes\":%lu,\"main_stack_virtual_bytes\":%lu,\"stacks\":[",
         kThreads, kStackBytes, kTouchedBytes, page, thread_rss, thread_virtual, guard, main_rss,
         main_virtual);
  for (int t = 0; t < kThreads; ++t) {
    struct mapping* m = &maps[stack_index[t]];
    printf("%s{\"start\":\"0x%lx\",\"end\":\"0x%lx\",\"rss_bytes\":%lu}", t ? "," : "", m->start,
           m->end, m->rss_kb * 1024);
  }
  printf("]}\n");
  fflush(stdout);
  pthread_barrier_wait(&leave);
  for (int t = 0; t < kThreads; ++t) pthread_join(threads[t], NULL);
  return 0;
}
