// Echoes stdin to stdout upper-cased, writes a line to stderr, sees its arguments, exits 7.
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  int c;
  while ((c = getchar()) != EOF) putchar(toupper(c));
  fprintf(stderr, "argc=%d last=%s\n", argc, argv[argc - 1]);
  char* block = malloc(64);  // @block
  (void)block;
  return 7;
}
