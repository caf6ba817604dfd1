// Known allocations for the estimates' errors (tests/e2e/test_estimate_errors.py): small
// blocks whose figure a 512 KiB rate leaves ~70% uncertain, large blocks, blocks freed at
// once, and last an anonymous mapping (recorded in full: exact). The small and large blocks and
// the mapping are in use at exit; the heap's own peak comes before the mapping.
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

enum { kSmallSize = 1000, kSmallCount = 1000 };
enum { kLargeSize = 1000000, kLargeCount = 10 };
enum { kFleetingSize = 5000, kFleetingCount = 2000 };
enum { kMappedSize = 2 << 20 };

static void* small(void) {
  return malloc(kSmallSize);  // @small
}

static void* large(void) {
  return malloc(kLargeSize);  // @large
}

static void fleeting(void) {
  char* p = malloc(kFleetingSize);  // @fleeting
  p[0] = 1;
  free(p);
}

static void* mapped(void) {
  return mmap(NULL, kMappedSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
}

int main(void) {
  static void* kept[kSmallCount + kLargeCount];
  for (int i = 0; i < kSmallCount; ++i) kept[i] = small();
  for (int i = 0; i < kLargeCount; ++i) kept[kSmallCount + i] = large();
  for (int i = 0; i < kFleetingCount; ++i) fleeting();
  for (int i = 0; i < kSmallCount + kLargeCount; ++i) memset(kept[i], 2, 16);
  char* map = mapped();
  if (map == MAP_FAILED) return 1;
  map[0] = 1;
  return 0;
}
