// Known allocations for the estimates' errors (tests/e2e/test_estimate_errors.py): small
// blocks whose figure a 512 KiB rate leaves ~70% uncertain, large blocks, and blocks freed at
// once. Only the small and large ones are in use at exit.
#include <stdlib.h>
#include <string.h>

enum { kSmallSize = 1000, kSmallCount = 1000 };
enum { kLargeSize = 1000000, kLargeCount = 10 };
enum { kFleetingSize = 5000, kFleetingCount = 2000 };

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

int main(void) {
  static void* kept[kSmallCount + kLargeCount];
  for (int i = 0; i < kSmallCount; ++i) kept[i] = small();
  for (int i = 0; i < kLargeCount; ++i) kept[kSmallCount + i] = large();
  for (int i = 0; i < kFleetingCount; ++i) fleeting();
  for (int i = 0; i < kSmallCount + kLargeCount; ++i) memset(kept[i], 2, 16);
  return 0;
}
