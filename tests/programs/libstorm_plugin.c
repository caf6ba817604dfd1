// A plugin that storm_dlopen loads and closes 1,000 times: it allocates in its constructor,
// frees that block in its destructor, and allocates for its caller in between.
#include <stdlib.h>
#include <string.h>

static char* held;

__attribute__((constructor)) static void plugin_load(void) {
  held = malloc(5555);  // @plugin_load
  if (held) memset(held, 1, 5555);
}

__attribute__((destructor)) static void plugin_unload(void) { free(held); }

void* plugin_work(int i) {
  return malloc(100 + i % 50);  // @plugin_work
}
