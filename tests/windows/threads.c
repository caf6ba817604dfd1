// Eight threads, each allocating 1000 blocks of 48 bytes and freeing all but 10 of them: 8000
// allocations, 384000 bytes, 3840 bytes of them never freed.
#include <stdio.h>
#include <stdlib.h>
#include <windows.h>

enum { kThreads = 8, kBlocks = 1000, kKept = 10, kBytes = 48 };

static DWORD WINAPI work(void* arg) {
  void* blocks[kBlocks];
  for (int i = 0; i < kBlocks; ++i) blocks[i] = malloc(kBytes);  // @block
  for (int i = kKept; i < kBlocks; ++i) free(blocks[i]);
  return 0;
}

int main(void) {
  HANDLE threads[kThreads];
  for (int i = 0; i < kThreads; ++i) threads[i] = CreateThread(NULL, 0, work, NULL, 0, NULL);
  WaitForMultipleObjects(kThreads, threads, TRUE, INFINITE);
  printf("threads done\n");
  return 0;
}
