// Loads plugin_alloc.so (next to this program), keeps 4321 bytes it allocates, closes it (the
// plugin's constructor keeps 1234 bytes of its own).
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char** argv) {
  char path[4096];
  snprintf(path, sizeof path, "%s", argv[0]);
  char* slash = strrchr(path, '/');
  strcpy(slash ? slash + 1 : path, "plugin_alloc.so");
  void* handle = dlopen(path, RTLD_NOW);  // @dlopen
  if (!handle) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  void* (*allocate)(void) = (void* (*)(void))dlsym(handle, "plugin_allocate");
  void* block = allocate();  // @allocate
  dlclose(handle);
  printf("allocated %s\n", block ? "ok" : "null");
  return 0;
}
