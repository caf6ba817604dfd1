// Anonymous mappings count as allocations (a partial munmap releases part of one); a
// file-backed mapping does not.
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

int main(void) {
  long page = sysconf(_SC_PAGESIZE);
  int flags = MAP_PRIVATE | MAP_ANONYMOUS;
  void* kept = mmap(NULL, 5 * page, PROT_READ | PROT_WRITE, flags, -1, 0);  // @kept 5 pages
  void* gone = mmap(NULL, 3 * page, PROT_READ | PROT_WRITE, flags, -1, 0);  // @gone 3 pages
  munmap(gone, 3 * page);
  char* part = mmap(NULL, 4 * page, PROT_READ | PROT_WRITE, flags, -1, 0);  // @part 4 pages
  munmap(part + page, page);  // one page out of the middle: 3 stay
  int fd = open("/proc/self/exe", O_RDONLY);
  void* file = mmap(NULL, page, PROT_READ, MAP_PRIVATE, fd, 0);  // not an allocation
  printf("%d %d %d\n", kept != MAP_FAILED, part != MAP_FAILED, file != MAP_FAILED);
  return 0;
}
