// Known allocations for the statistical tests of sampling (tests/e2e/test_sampling.py): small,
// large and mixed blocks, at one line each, in a program that runs in a few milliseconds, so
// that a hundred seeds fit in a test. Sizes in tests/e2e/test_sampling.py (StatsProgram).
//
//   temp:  10,000 blocks of 1,000 bytes, each freed at once (allocated only)
//   small: 50,000 blocks of 1,000 bytes, all live at the peak, every other one freed after it
//   mixed: 200 blocks of 64 KiB x (1 + i % 16), all live at the peak, every other one freed
//   large: 10 blocks of 1,000,000 bytes, never freed
//   bulk:  40 blocks of 1,000,000 bytes and 250 of 1,000, never freed
// The heap only grows until every block is allocated (the peak), then only shrinks.
#include <stdio.h>
#include <stdlib.h>

enum { kTempCount = 10000, kSmallCount = 50000, kMixedCount = 200, kLargeCount = 10 };
enum { kBulkLarge = 40, kBulkSmall = 250 };

static void* temp(size_t size) { return malloc(size); }   // @temp
static void* small(size_t size) { return malloc(size); }  // @small
static void* mixed(size_t size) { return malloc(size); }  // @mixed
static void* large(size_t size) { return malloc(size); }  // @large
static void* bulk(size_t size) { return malloc(size); }   // @bulk

static void* small_blocks[kSmallCount];
static void* mixed_blocks[kMixedCount];
static void* kept[kLargeCount + kBulkLarge + kBulkSmall];

int main(void) {
  for (int i = 0; i < kTempCount; ++i) free(temp(1000));
  for (int i = 0; i < kSmallCount; ++i) small_blocks[i] = small(1000);
  for (int i = 0; i < kMixedCount; ++i) mixed_blocks[i] = mixed((size_t)65536 * (1 + i % 16));
  int n = 0;
  for (int i = 0; i < kLargeCount; ++i) kept[n++] = large(1000000);
  for (int i = 0; i < kBulkLarge + kBulkSmall; ++i) kept[n++] = bulk(i < kBulkLarge ? 1000000 : 1000);
  // The peak: everything above is live.
  for (int i = 0; i < kSmallCount; i += 2) free(small_blocks[i]);
  for (int i = 0; i < kMixedCount; i += 2) free(mixed_blocks[i]);
  printf("%d\n", n);
  return 0;
}
