// A 100 MB file mapped and half of its pages touched, for `memlens rss`'s mapped_files part,
// exact to the page (tests/e2e/test_rss.py). Usage: rss_files DIR
//   Creates DIR/rss_files.data, 100,000,000 bytes (24,415 pages and a part page; sparse:
//   ftruncate), maps it whole MAP_PRIVATE, PROT_READ|PROT_WRITE, and writes one byte into every
//   other page (pages 0, 2, 4, ...: 12,208 pages).
// Why a write into a private mapping: a read fault on a file mapping also maps the neighbours
// the page cache holds (the kernel's fault-around, up to 16 pages, and madvise(MADV_RANDOM)
// does not turn it off), so what a read touches is not what becomes resident. A write fault on
// a private mapping copies that one page (copy-on-write) and maps nothing else: resident is
// exactly the pages written. The mapping stays file-backed, named by the file's path.
// Then ~350 ms asleep (the agent reads the mappings at most every 100 ms), the marker "touched",
// and one JSON line read from the program's own /proc/self/smaps for that mapping:
//   {"path":"...","start":"0x...","end":"0x...","touched_pages":12208,"page_bytes":4096,
//    "rss_bytes":...,"anonymous_bytes":...,"size_bytes":...}
// The test checks: the mappings pieces named by the path are in mapped_files, their resident
// bytes sum to rss_bytes, which is touched_pages x page_bytes, and their virtual to the size.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "memlens/memlens.h"

enum { kFileBytes = 100000000 };

struct smaps_entry {
  unsigned long start, end, rss_kb, anonymous_kb;
};

// The smaps entry of the mapping that holds `address`.
static int smaps_of(const void* address, struct smaps_entry* out) {
  FILE* f = fopen("/proc/self/smaps", "r");
  if (!f) return -1;
  char line[4096];
  int found = 0, in = 0;
  while (fgets(line, sizeof line, f)) {
    unsigned long start, end;
    if (sscanf(line, "%lx-%lx ", &start, &end) == 2) {  // a mapping's first line
      if (found) break;
      in = (uintptr_t)address >= start && (uintptr_t)address < end;
      if (in) {
        found = 1;
        out->start = start;
        out->end = end;
      }
    } else if (in) {
      sscanf(line, "Rss: %lu kB", &out->rss_kb);
      sscanf(line, "Anonymous: %lu kB", &out->anonymous_kb);
    }
  }
  fclose(f);
  return found ? 0 : -1;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: rss_files DIR\n");
    return 2;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/rss_files.data", argv[1]);
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd < 0 || ftruncate(fd, kFileBytes) != 0) {
    perror(path);
    return 1;
  }
  char* map = mmap(NULL, kFileBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  if (map == MAP_FAILED) {
    perror("mmap");
    return 1;
  }
  close(fd);
  long page = sysconf(_SC_PAGESIZE), pages = (kFileBytes + page - 1) / page, touched = 0;
  for (long p = 0; p < pages; p += 2, ++touched) map[p * page] = 1;

  struct smaps_entry e = {0};
  // Twice: the first reading's own allocations and stack settle before the one reported.
  if (smaps_of(map, &e) != 0 || smaps_of(map, &e) != 0) return 1;
  usleep(350000);
  memlens_add_marker("touched", "rss");
  printf("{\"path\":\"%s\",\"start\":\"0x%lx\",\"end\":\"0x%lx\",\"touched_pages\":%ld,"
         "\"page_bytes\":%ld,\"rss_bytes\":%lu,\"anonymous_bytes\":%lu,\"size_bytes\":%lu}\n",
         path, e.start, e.end, touched, page, e.rss_kb * 1024, e.anonymous_kb * 1024,
         e.end - e.start);
  fflush(stdout);
  munmap(map, kFileBytes);
  unlink(path);
  return 0;
}
