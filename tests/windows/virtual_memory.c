// VirtualAlloc and VirtualFree: 1 MiB reserved, 64 KiB of it committed later (memory from
// then on), 256 KiB reserved and committed at once then released, 128 KiB committed and kept.
#include <stdio.h>
#include <windows.h>

int main(void) {
  char* reserved = VirtualAlloc(NULL, 1 << 20, MEM_RESERVE, PAGE_NOACCESS);  // @reserve
  VirtualAlloc(reserved, 64 << 10, MEM_COMMIT, PAGE_READWRITE);  // @commit
  char* released =
      VirtualAlloc(NULL, 256 << 10, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);  // @released
  released[0] = 1;
  VirtualFree(released, 0, MEM_RELEASE);
  char* kept = VirtualAlloc(NULL, 128 << 10, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);  // @kept
  kept[0] = 1;
  printf("mapped %d\n", reserved[0]);
  return 0;
}
