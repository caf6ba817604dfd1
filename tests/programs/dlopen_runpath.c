// Opens a plugin by its bare name, which only this program's RUNPATH ($ORIGIN/runpath) finds:
// glibc searches the RUNPATH of dlopen's caller, and memlens's dlopen must not take its place.
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(void) {
  void* plugin = dlopen("runpath_plugin.so", RTLD_NOW);
  if (!plugin) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  void* (*allocate)(void) = (void* (*)(void))dlsym(plugin, "plugin_allocate");
  free(allocate());
  puts("dlopen: ok");
  return 0;
}
