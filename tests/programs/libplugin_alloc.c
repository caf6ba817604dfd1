// A plugin that the dlopen test loads, allocates from, and closes.
#include <stdlib.h>

void* plugin_allocate(void) {
  return malloc(4321);  // @plugin_allocate
}
