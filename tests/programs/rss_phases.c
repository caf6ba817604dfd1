// 500 MB in small blocks, for `memlens rss` (tests/e2e/test_rss.py): glibc's free memory at
// each phase, and what malloc_trim(0) gives back.
//   filled      5,000,000 blocks of 100 bytes (500,000,000 bytes, 112-byte chunks), then one
//               100-byte "fence" block above them, kept to the end: it keeps the freed chunks
//               off the top chunk, so that free() never shrinks the heap and malloc_trim(0)
//               gives their pages back with madvise(MADV_DONTNEED) (resident drops, [heap]'s
//               size stays) instead of moving the break
//   half_freed  every other block freed (no two free chunks touch: 2.5 M chunks in fastbins)
//   all_freed   every block freed (5 M chunks in fastbins: free() never consolidates them)
//   trimmed     malloc_trim(0): consolidated into one free chunk, its pages given back
// The array of pointers (40 MB) is an mmap of ours, not a malloc: mallinfo2 then counts the
// 100-byte blocks alone (hblkhd stays 0), and memlens shows the array in program_mappings.
// stdout is line-buffered into a static buffer and /proc is read with read(2), so nothing
// here allocates but the blocks.
//
// At each phase, once the phase's work is done: one JSON line on stdout with glibc's figures
// (mallinfo2: arena, fordblks, keepcost, hblkhd, uordblks; a single-threaded program has only
// the main arena, which mallinfo2's sums are then of), the bytes the program holds, the
// resident bytes of /proc/self/statm, the sum of /proc/self/smaps's Rss lines and how long
// reading smaps took; then asleep past the agent's next reading of the mappings (at most every
// 100 ms, and 100x a reading's duration after the last: 350 ms and 400x the longest reading of
// smaps here so far, as the agent's own reading adds pagemap to smaps and, on a loaded machine,
// took 2.3x the program's in one CI run), then the marker named after the phase.
// The test checks: the main arena's free_bytes within 2% of fordblks at each phase; after
// trimmed, malloc_free's resident_bytes down by >= 90% of all_freed's, its virtual_bytes not;
// resident_bytes close to smaps's sum (and statm's).
// tcache: glibc keeps up to 7 freed chunks per size in the thread's cache, and mallinfo2
// counts those as in use (they are in no bin); memlens sees them freed. 7 x 112 bytes here.
#define _GNU_SOURCE
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "memlens/memlens.h"

enum { kBlocks = 5000000, kBlockBytes = 100 };

static char out_buffer[1 << 16];
static char read_buffer[1 << 20];

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

// Reads /proc/self/smaps whole, as the agent's reading would: how long it took, and the sum of
// its Rss lines. Plain read(2) into a static buffer: a FILE would malloc, and its 1 KiB buffer
// is a large request, which makes malloc consolidate the fastbins (the freed chunks this
// program wants left as they are).
static double read_smaps(long* rss_bytes) {
  double start = now_ms();
  int fd = open("/proc/self/smaps", O_RDONLY);
  if (fd < 0) abort();
  size_t used = 0;
  ssize_t n;
  while ((n = read(fd, read_buffer + used, sizeof read_buffer - 1 - used)) > 0) used += n;
  close(fd);
  double took = now_ms() - start;
  read_buffer[used] = 0;
  *rss_bytes = 0;
  for (const char* line = read_buffer; line && *line; line = strchr(line, '\n')) {
    if (*line == '\n') ++line;
    long kb;
    if (sscanf(line, "Rss: %ld kB", &kb) == 1) *rss_bytes += kb * 1024;
  }
  return took;
}

static long statm_resident_bytes(void) {
  int fd = open("/proc/self/statm", O_RDONLY);
  ssize_t n = fd < 0 ? -1 : read(fd, read_buffer, sizeof read_buffer - 1);
  if (n <= 0) abort();
  close(fd);
  read_buffer[n] = 0;
  long size = 0, resident = 0;
  if (sscanf(read_buffer, "%ld %ld", &size, &resident) != 2) abort();
  return resident * sysconf(_SC_PAGESIZE);
}

static void phase(const char* name, long held_bytes) {
  struct mallinfo2 m = mallinfo2();
  long smaps_rss = 0;
  double read_ms = read_smaps(&smaps_rss);
  // The agent's next reading comes no sooner than 100 ms after its last, nor 100x the last
  // one's duration (with 600 MB resident, smaps takes 40-50 ms to read on a VM; pagemap adds to
  // that, and a loaded machine slows one reading more than another: 4x margin). Its last
  // reading may be of the phase before, with more resident: the longest so far.
  static double longest_read_ms;
  if (read_ms > longest_read_ms) longest_read_ms = read_ms;
  double settle_ms = 350 + 400 * longest_read_ms;
  printf("{\"phase\":\"%s\",\"arena\":%zu,\"fordblks\":%zu,\"keepcost\":%zu,\"hblkhd\":%zu,"
         "\"uordblks\":%zu,\"held_bytes\":%ld,\"statm_resident_bytes\":%ld,"
         "\"smaps_rss_bytes\":%ld,\"smaps_read_ms\":%.3f,\"settle_ms\":%.0f}\n",
         name, m.arena, m.fordblks, m.keepcost, m.hblkhd, m.uordblks, held_bytes,
         statm_resident_bytes(), smaps_rss, read_ms, settle_ms);
  usleep((useconds_t)(settle_ms * 1000));
  memlens_add_marker(name, "rss");
}

int main(void) {
  setvbuf(stdout, out_buffer, _IOLBF, sizeof out_buffer);
  size_t array_bytes = sizeof(void*) * kBlocks;
  void** blocks = mmap(NULL, array_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0);
  if (blocks == MAP_FAILED) return 1;
  for (long i = 0; i < kBlocks; ++i) blocks[i] = malloc(kBlockBytes);  // @blocks
  void* fence = malloc(kBlockBytes);  // @fence
  phase("filled", (long)kBlocks * kBlockBytes + kBlockBytes);
  for (long i = 0; i < kBlocks; i += 2) free(blocks[i]);
  phase("half_freed", (long)kBlocks / 2 * kBlockBytes + kBlockBytes);
  for (long i = 1; i < kBlocks; i += 2) free(blocks[i]);
  phase("all_freed", kBlockBytes);
  malloc_trim(0);
  phase("trimmed", kBlockBytes);
  free(fence);
  munmap(blocks, array_bytes);
  return 0;
}
