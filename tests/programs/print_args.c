// Writes each of its arguments (argv[0] excluded) to stdout as it got it, each followed by a NUL
// byte, so a test can compare them byte for byte with a direct run.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) fwrite(argv[i], 1, strlen(argv[i]) + 1, stdout);
  free(malloc(16));  // something to record
  return 3;
}
