// Loads storm_plugin.so (next to this program), calls it and closes it, 1,000 times over; each
// time checks that the library really left the process (RTLD_NOLOAD finds it no more). Keeps
// the blocks of every tenth call and frees the others.
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kLoads = 1000 };

int main(int argc, char** argv) {
  (void)argc;
  char path[4096];
  snprintf(path, sizeof path, "%s", argv[0]);
  char* slash = strrchr(path, '/');
  strcpy(slash ? slash + 1 : path, "storm_plugin.so");
  static void* kept[kLoads];
  int unloaded = 0;
  long kept_bytes = 0;
  for (int i = 0; i < kLoads; ++i) {
    void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      fprintf(stderr, "dlopen: %s\n", dlerror());
      return 1;
    }
    void* (*work)(int) = (void* (*)(int))dlsym(handle, "plugin_work");
    void* block = work(i);
    if (i % 10 == 0) {
      kept[i] = block;
      kept_bytes += 100 + i % 50;
    } else {
      free(block);
    }
    if (dlclose(handle) != 0) {
      fprintf(stderr, "dlclose: %s\n", dlerror());
      return 1;
    }
    void* again = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (again) {
      dlclose(again);
    } else {
      ++unloaded;
    }
  }
  printf("%d loads, %d unloads, %ld bytes kept\n", kLoads, unloaded, kept_bytes);
  return 0;
}
