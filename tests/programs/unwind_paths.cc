// Stacks that must come out exact: through Debian's libc and libstdc++ (built without frame
// pointers), through a signal handler, in a thread, 10,000 frames deep, and where the
// unwinder's reuse of the previous stack could be fooled (the same frames at the same stack
// depth reached from different call sites; an exception unwinding frames between two
// allocations). This file is built without frame pointers (tests/CMakeLists.txt).
//
// Prints "qsort=N sort=N" (the comparator calls, each of which allocated once) and "ok".
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

void* g_keep[64];
int g_kept = 0;
int g_qsort_calls = 0;
int g_sort_calls = 0;
volatile sig_atomic_t g_in_handler = 0;

// Each comparison allocates 24 bytes; the first block is kept (its stack is the leak's).
extern "C" int CompareAllocating(const void* a, const void* b) {
  void* p = malloc(24);  // @qsort_cmp
  if (g_qsort_calls++ == 0) {
    g_keep[g_kept++] = p;
  } else {
    free(p);
  }
  return *static_cast<const int*>(a) - *static_cast<const int*>(b);
}

__attribute__((noinline)) void SortWithQsort() {
  int values[50];
  for (int i = 0; i < 50; ++i) values[i] = (i * 37) % 50;
  qsort(values, 50, sizeof(int), CompareAllocating);  // @qsort_call
}

__attribute__((noinline)) void SortWithStdSort() {
  std::vector<int> values(200);
  for (int i = 0; i < 200; ++i) values[i] = (i * 73) % 200;
  std::sort(values.begin(), values.end(), [](int a, int b) {  // @sort_call
    char* p = new char[40];  // @sort_cmp 40 bytes per comparison, the first one kept
    if (g_sort_calls++ == 0) {
      g_keep[g_kept++] = p;
    } else {
      delete[] p;
    }
    return a < b;
  });
}

__attribute__((noinline)) void CallThroughFunction() {
  std::function<void()> f = [] { g_keep[g_kept++] = malloc(333); };  // @function_body
  f();  // @function_call
}

// libstdc++.so itself allocates: std::string's growth calls operator new from inside it.
__attribute__((noinline)) void GrowString() {
  std::string* s = new std::string;
  s->reserve(5000);  // @string_reserve 5001 bytes from libstdc++
  g_keep[g_kept++] = s;
}

void OnSignal(int) {
  g_keep[g_kept++] = malloc(77);  // @in_handler 77 bytes
  g_in_handler = 1;
}

__attribute__((noinline)) void RaiseSignal() {
  signal(SIGUSR1, OnSignal);
  raise(SIGUSR1);  // @raise
}

void* ThreadBody(void*) {
  g_keep[g_kept++] = malloc(4444);  // @in_thread 4444 bytes
  return nullptr;
}

__attribute__((noinline)) void StartThread() {
  pthread_t t;
  pthread_create(&t, nullptr, ThreadBody, nullptr);
  pthread_join(t, nullptr);
}

// 10,000 levels: 16 bytes each, freed on the way back, and 1,000 bytes kept at the bottom.
__attribute__((noinline)) void Recurse(int depth) {
  void* p = malloc(16);  // @recurse_alloc
  if (depth == 0) {
    g_keep[g_kept++] = malloc(1000);  // @recurse_bottom
  } else {
    Recurse(depth - 1);  // @recurse_call
  }
  free(p);
}

// Two call sites of the same function at the same stack depth: every frame of the two stacks
// is identical (return address and stack pointer) except main's return address.
__attribute__((noinline)) void* Leaf(size_t n) {
  return malloc(n);  // @twin_leaf
}
__attribute__((noinline)) void* Twin(size_t n) { return Leaf(n); }  // @twin

// Between two allocations at the same depth, an exception unwinds through the frames that a
// reused stack would have kept.
__attribute__((noinline)) void* Thrower(int n) {
  void* p = malloc(50);  // @thrower_alloc 50 bytes, always freed
  if (n >= 0) {
    free(p);
    throw std::runtime_error("x");  // the exception object comes from libstdc++'s allocation
  }
  return p;
}
__attribute__((noinline)) void* CatchAndAllocate() {
  try {
    Thrower(1);  // @thrower_call
  } catch (const std::exception&) {
  }
  return Twin(61);  // @after_catch
}

// Returning from a deep call chain and calling another one whose frames sit at the same
// stack pointers.
__attribute__((noinline)) void* DeepA(int n) { return n ? DeepA(n - 1) : malloc(71); }  // @deep_a
__attribute__((noinline)) void* DeepB(int n) { return n ? DeepB(n - 1) : malloc(72); }  // @deep_b

}  // namespace

int main() {
  SortWithQsort();  // @main_qsort
  SortWithStdSort();  // @main_sort
  CallThroughFunction();  // @main_function
  GrowString();  // @main_string
  RaiseSignal();  // @main_raise
  StartThread();  // @main_thread
  Recurse(10000);  // @main_recurse
  for (int i = 0; i < 4; ++i) {
    g_keep[g_kept++] = Twin(100);  // @twin_first 4 x 100 bytes
    g_keep[g_kept++] = Twin(100);  // @twin_second 4 x 100 bytes
  }
  for (int i = 0; i < 3; ++i) free(Thrower(-1));  // @thrower_plain
  g_keep[g_kept++] = CatchAndAllocate();  // @main_catch
  for (int i = 0; i < 3; ++i) {
    g_keep[g_kept++] = DeepA(20);  // @main_deep_a
    g_keep[g_kept++] = DeepB(20);  // @main_deep_b
  }
  std::printf("qsort=%d sort=%d\n%s\n", g_qsort_calls, g_sort_calls,
              g_in_handler ? "ok" : "no signal");
  return 0;
}
