// A runtime's way with memory (the JVM's, V8's): reserve a large range PROT_NONE, commit parts
// of it with mprotect or with mmap MAP_FIXED, decommit, unmap. Only what the program can
// access counts as in use; the reservation is address space.
#include <stdlib.h>
#include <sys/mman.h>

#define MIB (1024L * 1024L)

int main(void) {
  void* heap = malloc(MIB + 1000);  // @heap
  int flags = MAP_PRIVATE | MAP_ANONYMOUS;
  char* base = mmap(NULL, 1024 * MIB, PROT_NONE, flags | MAP_NORESERVE, -1, 0);  // @reserve
  if (heap == NULL || base == MAP_FAILED) return 1;
  int rw = PROT_READ | PROT_WRITE;
  if (mprotect(base, 8 * MIB, rw) != 0) return 2;             // @commit8 [0, 8 MiB)
  if (mprotect(base + 8 * MIB, 4 * MIB, rw) != 0) return 3;   // @commit4 [8, 12 MiB)
  if (mprotect(base, 8 * MIB, PROT_READ) != 0) return 4;      // @readonly still in use
  // Over the last 2 MiB of the @commit4 range and 2 MiB still reserved: 14 MiB mapped in all.
  void* fixed = mmap(base + 10 * MIB, 4 * MIB, rw, flags | MAP_FIXED, -1, 0);  // @fixed
  if (fixed != base + 10 * MIB) return 5;
  if (mprotect(base + 2 * MIB, 6 * MIB, PROT_NONE) != 0) return 6;  // @decommit [2, 8 MiB)
  if (munmap(base + 10 * MIB, 1014 * MIB) != 0) return 7;  // @unmap the @fixed range and the rest
  // What is left: [0, 2 MiB) of @commit8 (read-only now), [8, 10 MiB) of @commit4.
  base[8 * MIB] = 1;
  return base[0] + base[8 * MIB] == 1 ? 0 : 8;
}
