// Allocations before main (a static constructor) and in an atexit handler are recorded.
#include <cstdio>
#include <cstdlib>

void* from_ctor;
void* from_atexit;

void* allocate_in_ctor() {
  return std::malloc(1111);  // @ctor
}

void allocate_in_atexit() {
  from_atexit = std::malloc(2222);  // @atexit
}

struct Early {
  Early() { from_ctor = allocate_in_ctor(); }
};
Early early;

int main() {
  std::atexit(allocate_in_atexit);
  std::printf("main\n");
  return 0;
}
