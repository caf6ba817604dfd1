// Loads exit_library.dll, whose DllMain calls exit(7) under the loader's lock: the process
// must end at once with code 7, under memlens as without it.
#include <windows.h>

int main(void) {
  LoadLibraryA("exit_library.dll");
  return 1;
}
