// Spans from C without memlens run: loads the agent (argv[1]) with dlopen, then records two
// spans (argv[2], argv[3]) with memlens_start/memlens_stop around known mallocs, and tries the
// calls that must be refused (stop while not recording, start while recording, an unwritable
// path: argv[4]). Prints one line per call's result, so the test sees the program unharmed.
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "memlens/memlens.h"

void* first_span(void) { return malloc(10001); }  // @first_span
void* second_span(void) { return malloc(20002); }  // @second_span
void* outside(void) { return malloc(30003); }  // @outside

int main(int argc, char** argv) {
  if (argc != 5) return 2;
  void* before = outside();  // allocated before the first span, freed inside it
  // RTLD_GLOBAL: memlens.h looks the functions up in the process (dlsym(RTLD_DEFAULT)).
  if (!dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE)) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  printf("stop before start: %d\n", memlens_stop());
  printf("start: %d\n", memlens_start(argv[2]));
  printf("start again: %d\n", memlens_start(argv[3]));
  void* kept = first_span();  // in use at the first span's end, freed in the second
  free(before);
  memlens_flush();
  printf("stop: %d\n", memlens_stop());
  printf("stop again: %d\n", memlens_stop());
  void* between = outside();  // recorded by no span
  char error[200];
  printf("start unwritable: %d\n", memlens_start_with(argv[4], NULL, error, sizeof error));
  printf("reason: %s\n", error);
  printf("bad option: %d\n", memlens_start_with(argv[3], "native=2", error, sizeof error));
  printf("reason: %s\n", error);
  printf("start second: %d\n", memlens_start_with(argv[3], "native=1", error, sizeof error));
  void* second = second_span();
  free(kept);
  printf("stop second: %d\n", memlens_stop());
  free(between);
  free(second);  // freed after its span: in use at that span's end
  return 0;
}
