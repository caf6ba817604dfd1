// HeapCreate's heaps: on the first, 4 blocks of 3000 bytes (one freed) and one zeroed block of
// 5000 that HeapReAlloc grows to 6000; the second gets 2 blocks of 700 and is destroyed with
// them. At exit the first heap holds 3 x 3000 + 6000 bytes. And ntdll's own name for HeapAlloc,
// RtlAllocateHeap, imported from ntdll.dll as system DLLs do: 4321 bytes of the process heap.
#include <stdio.h>
#include <windows.h>

__declspec(dllimport) void* __stdcall RtlAllocateHeap(void* heap, ULONG flags, SIZE_T size);

int main(void) {
  HANDLE heap = HeapCreate(0, 0, 1 << 20);  // @create (at most 1 MiB)
  void* blocks[4];
  for (int i = 0; i < 4; ++i) blocks[i] = HeapAlloc(heap, 0, 3000);  // @blocks
  HeapFree(heap, 0, blocks[0]);
  // Past the heap's maximum: fails, and blocks[1] lives on.
  void* failed = HeapReAlloc(heap, 0, blocks[1], 2 << 20);  // @failed
  void* zeroed = HeapAlloc(heap, HEAP_ZERO_MEMORY, 5000);  // @zeroed
  zeroed = HeapReAlloc(heap, 0, zeroed, 6000);  // @grown
  HANDLE gone = HeapCreate(0, 0, 0);  // @create_gone
  for (int i = 0; i < 2; ++i) HeapAlloc(gone, 0, 700);  // @gone_blocks
  HeapDestroy(gone);
  void* from_ntdll = RtlAllocateHeap(GetProcessHeap(), 0, 4321);  // @ntdll
  printf("heaps %d\n", zeroed != NULL && from_ntdll != NULL && failed == NULL);
  return 0;
}
