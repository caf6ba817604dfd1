// A heap made on one thread and used on another: main creates it, a worker thread allocates 10
// blocks of 1000 bytes on it, main destroys it. Then 300 short threads, each allocating once:
// their rings are freed as they end (the program prints how many 1 MiB private regions it has,
// the agent's rings among them, and the test compares that with the program alone).
#include <stdio.h>
#include <stdlib.h>
#include <windows.h>

static HANDLE heap;

static DWORD WINAPI use_heap(void* arg) {
  for (int i = 0; i < 10; ++i) HeapAlloc(heap, 0, 1000);  // @worker_blocks
  return 0;
}

static DWORD WINAPI short_life(void* arg) {
  free(malloc(32));
  return 0;
}

static int big_regions(void) {
  int count = 0;
  MEMORY_BASIC_INFORMATION info;
  for (char* at = 0; VirtualQuery(at, &info, sizeof info) == sizeof info;
       at = (char*)info.BaseAddress + info.RegionSize) {
    if (info.State == MEM_COMMIT && info.Type == MEM_PRIVATE && info.RegionSize >= (1 << 20)) ++count;
  }
  return count;
}

int main(void) {
  heap = HeapCreate(0, 0, 0);
  HANDLE worker = CreateThread(NULL, 0, use_heap, NULL, 0, NULL);
  WaitForSingleObject(worker, INFINITE);
  HeapDestroy(heap);
  for (int i = 0; i < 300; ++i) {
    HANDLE t = CreateThread(NULL, 0, short_life, NULL, 0, NULL);
    WaitForSingleObject(t, INFINITE);
    CloseHandle(t);
  }
  Sleep(300);  // the agent's writer frees the rings of ended threads every 10 ms
  printf("big regions %d\n", big_regions());
  return 0;
}
