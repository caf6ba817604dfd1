// Prints its arguments, one per line between brackets, and its working directory, and exits
// with the code given as its first argument: memlens.exe must pass all of them through.
#include <direct.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) printf("[%s]\n", argv[i]);
  char cwd[1024];
  printf("cwd %s\n", _getcwd(cwd, sizeof cwd));
  fprintf(stderr, "to stderr\n");
  return argc > 1 ? atoi(argv[1]) : 0;
}
