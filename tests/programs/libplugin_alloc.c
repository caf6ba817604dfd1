// A plugin that the dlopen test loads, allocates from, and closes. Its constructor, which
// dlopen runs, allocates too (a block the plugin keeps).
#include <stdlib.h>

static void* kept_by_constructor;

__attribute__((constructor)) static void plugin_constructor(void) {
  kept_by_constructor = malloc(1234);  // @plugin_constructor
}

void* plugin_allocate(void) {
  return malloc(4321);  // @plugin_allocate
}
