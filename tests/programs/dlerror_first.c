// Asks dlerror() before any dl* call of its own (nothing may be pending), then loads and closes
// plugin_alloc.so (next to this program).
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char** argv) {
  (void)argc;
  const char* error = dlerror();
  printf("dlerror: %s\n", error ? error : "none");
  char path[4096];
  snprintf(path, sizeof path, "%s", argv[0]);
  char* slash = strrchr(path, '/');
  strcpy(slash ? slash + 1 : path, "plugin_alloc.so");
  void* handle = dlopen(path, RTLD_NOW);
  printf("dlopen: %s\n", handle ? "ok" : dlerror());
  if (handle) dlclose(handle);
  return 0;
}
