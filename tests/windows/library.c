// A DLL that library_loader.exe loads with LoadLibrary and unloads with FreeLibrary: its
// DllMain keeps 777 bytes when it is loaded, library_allocate keeps count blocks of 1234.
#include <stdlib.h>
#include <windows.h>

void* volatile kept;  // so that the compiler keeps each malloc

static void* at_load;

__declspec(dllexport) void library_allocate(int count) {
  for (int i = 0; i < count; ++i) kept = malloc(1234);  // @library_block
}

BOOL WINAPI DllMain(HINSTANCE self, DWORD reason, LPVOID reserved) {
  if (reason == DLL_PROCESS_ATTACH) at_load = malloc(777);  // @at_load
  return TRUE;
}
