// Loads library.dll at run time (LoadLibrary), has it allocate 3 blocks of 1234 bytes, unloads
// it (FreeLibrary), then allocates 100 bytes of its own: the library's blocks keep their
// function and line after it is gone.
#include <stdio.h>
#include <stdlib.h>
#include <windows.h>

int main(void) {
  HMODULE library = LoadLibraryA("library.dll");
  if (!library) return 2;
  void (*allocate)(int) = (void (*)(int))(void*)GetProcAddress(library, "library_allocate");
  if (!allocate) return 3;
  allocate(3);  // @call
  FreeLibrary(library);
  void* after = malloc(100);  // @after
  printf("unloaded %p\n", after != NULL ? (void*)1 : NULL);
  return 0;
}
