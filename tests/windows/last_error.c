// The thread's last error across allocations: each call below succeeds, and Windows leaves the
// last error as it was; the program prints it after each. memlens's hooks must do the same.
#include <stdio.h>
#include <stdlib.h>
#include <windows.h>

int main(void) {
  SetLastError(12345);
  void* p = malloc(100);
  printf("malloc %lu\n", GetLastError());
  SetLastError(23456);
  free(p);
  printf("free %lu\n", GetLastError());
  SetLastError(34567);
  void* h = HeapAlloc(GetProcessHeap(), 0, 100);
  printf("HeapAlloc %lu\n", GetLastError());
  SetLastError(45678);
  HeapFree(GetProcessHeap(), 0, h);
  printf("HeapFree %lu\n", GetLastError());
  SetLastError(56789);
  void* v = VirtualAlloc(NULL, 4096, MEM_COMMIT | MEM_RESERVE, PAGE_READWRITE);
  printf("VirtualAlloc %lu\n", GetLastError());
  VirtualFree(v, 0, MEM_RELEASE);
  return 0;
}
