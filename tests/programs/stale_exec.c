// An exec while memlens run is stopped (the test stops it after "ready"): the dlclose's wait for
// the writer runs out, so the exec's does not wait, and the new image (argv[1] given) allocates
// 20 blocks of 333 bytes and says "execd" before memlens run goes on; then, told to, 20 blocks
// of 444 bytes, whose stacks the agent sends relative to the first ones'. The old image's
// writer, resumed, must not drain the new image's rings: the new image's writer would then
// miss the stacks the later ones are relative to.
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char** argv) {
  char line[16];
  if (argc > 1) {
    void* blocks[20];
    for (int i = 0; i < 20; ++i) blocks[i] = malloc(333);  // @new
    printf("execd\n");
    fflush(stdout);
    if (!fgets(line, sizeof line, stdin)) return 1;
    for (int i = 0; i < 20; ++i) free(blocks[i]);
    for (int i = 0; i < 20; ++i) blocks[i] = malloc(444);  // @after
    for (int i = 0; i < 20; ++i) free(blocks[i]);
    return 0;
  }
  printf("ready\n");
  fflush(stdout);
  if (!fgets(line, sizeof line, stdin)) return 1;
  void* lib = dlopen("libm.so.6", RTLD_NOW);
  if (lib) dlclose(lib);
  execl("/proc/self/exe", argv[0], "again", (char*)NULL);
  return 2;
}
