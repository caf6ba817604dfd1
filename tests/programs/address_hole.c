// A known address-space layout: one anonymous mapping of 8 MiB, then 512 KiB unmapped from
// its middle (at offset 2 MiB), so the live mappings are 7.5 MiB spanning 8 MiB with a free
// gap of exactly 512 KiB. Prints the mapping's address. Exits with the mappings in place.
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>

int main(void) {
  size_t size = 8u << 20;
  char* p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);  // @map
  if (p == MAP_FAILED) return 1;
  if (munmap(p + (2u << 20), 512u << 10) != 0) return 1;  // @hole
  printf("%lu\n", (unsigned long)(uintptr_t)p);
  return 0;
}
