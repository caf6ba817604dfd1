// Every form of C++'s operator new and delete, at known lines with known sizes; run plain and
// with jemalloc or tcmalloc preloaded, whose own operator new calls their malloc directly
// (tests/e2e/test_native_allocations.py). Then an allocation too large to succeed, which must
// still throw std::bad_alloc to the program, and its nothrow form, which must return null.
#include <cstdio>
#include <new>

struct alignas(64) Line {
  char bytes[192];
};

struct Sized {
  char bytes[40];
};

int main() {
  char* plain = new char[100];                        // @array 100 bytes, kept
  int* one = new int(7);                              // @scalar 4 bytes, deleted
  Sized* sized = new Sized;                           // @sized 40 bytes, sized delete
  char* quiet = new (std::nothrow) char[300];         // @nothrow_array 300 bytes, kept
  Line* line = new Line;                              // @aligned 192 bytes, aligned delete
  Line* lines = new Line[3];                          // @aligned_array 576 bytes, kept
  Line* quiet_line = new (std::nothrow) Line;         // @aligned_nothrow 192 bytes, kept
  std::printf("aligned %d\n", (reinterpret_cast<unsigned long>(line) % 64 == 0 &&
                               reinterpret_cast<unsigned long>(lines) % 64 == 0 &&
                               reinterpret_cast<unsigned long>(quiet_line) % 64 == 0));
  delete one;
  delete sized;
  delete line;
  try {
    char* huge = new char[size_t{1} << 62];
    std::printf("huge %p\n", static_cast<void*>(huge));
  } catch (const std::bad_alloc&) {
    std::printf("caught bad_alloc\n");
  }
  char* none = new (std::nothrow) char[size_t{1} << 62];
  std::printf("nothrow %s\n", none ? "block" : "null");
  std::printf("%d %d %d %d\n", plain[0] = 1, quiet[0] = 2, lines[0].bytes[0] = 3,
              quiet_line->bytes[0] = 4);
  return 0;
}
