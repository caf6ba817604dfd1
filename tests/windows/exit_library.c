// A DLL whose DllMain ends the process (exit(7)) while the loader's lock is held.
#include <stdlib.h>
#include <windows.h>

BOOL WINAPI DllMain(HINSTANCE self, DWORD reason, LPVOID reserved) {
  if (reason == DLL_PROCESS_ATTACH) exit(7);
  return TRUE;
}
