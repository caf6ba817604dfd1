// A stand-in for a Python interpreter memlens has no hooks for (3.12), whatever interpreters a
// machine has: named python* so that `memlens run` treats it as one; answers the version question
// `memlens run` asks an interpreter whose file name says no version (`-c ...`) as python3.12
// would; and exports Py_Version as CPython 3.12 does, which the agent looks up when preloaded.
// Otherwise it allocates 1,000 bytes and says "ran".
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const unsigned long Py_Version = 0x030C01F0;  // 3.12.1 final

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "-c") == 0) {
      puts("3.12");
      return 0;
    }
  }
  char* volatile block = malloc(1000);  // @alloc
  puts("ran");
  free(block);
  return 0;
}
