// A program that replaces only the plain operator new and delete, serving them from its own
// arena. The standard's default new[], sized delete and delete[] must reach these two: the
// agent defines all twenty forms, and must forward every one when the program replaced any
// (src/agent/hooks/cxx_interposers.cc). An arena block handed to free() would abort the run.
#include <cstdio>
#include <cstdlib>
#include <new>

namespace {
alignas(64) char g_arena[1 << 16];
size_t g_used = 0;
int g_news = 0, g_deletes = 0;
}  // namespace

void* operator new(size_t size) {
  size = (size + 15) & ~size_t{15};
  if (g_used + size > sizeof g_arena) throw std::bad_alloc();
  ++g_news;
  void* p = g_arena + g_used;
  g_used += size;
  return p;
}

// Only the unsized delete, on purpose: the default sized delete must forward to it.
#pragma GCC diagnostic ignored "-Wsized-deallocation"
void operator delete(void* p) noexcept {
  if (!p) return;
  if (static_cast<char*>(p) < g_arena || static_cast<char*>(p) >= g_arena + sizeof g_arena) {
    std::abort();  // not ours: someone else's block reached the replaced delete
  }
  ++g_deletes;
}

struct Sized {
  char bytes[40];
};

int main() {
  int* numbers = new int[10];  // @new_array the default new[] calls the replaced new
  Sized* sized = new Sized;    // freed by the default sized delete, which calls the replaced one
  delete sized;
  delete[] numbers;  // the default delete[] calls the replaced delete
  char* block = static_cast<char*>(std::malloc(64));  // @malloc 64 bytes: still recorded
  std::free(block);
  std::printf("news=%d deletes=%d\n", g_news, g_deletes);
  return 0;
}
