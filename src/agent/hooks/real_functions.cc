// src/agent/hooks/real_functions.cc: see real_functions.h.
#include "agent/hooks/real_functions.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>

namespace memlens::agent::real {

#define MEMLENS_DEFINE_REAL(name, ret, params, args) ret(*name) params = nullptr;
MEMLENS_HOOKED_FUNCTIONS(MEMLENS_DEFINE_REAL)
#undef MEMLENS_DEFINE_REAL

// dlsym's own allocations (an error buffer, a few dozen bytes) come from here; never freed.
alignas(64) char g_bootstrap_arena[kBootstrapArenaBytes];
constinit thread_local bool t_resolving = false;

namespace {

std::atomic<int> g_state{0};  // 0 unresolved, 1 resolving, 2 resolved
std::atomic<size_t> g_arena_used{0};

bool SameObject(const void* a, const void* b) {
  Dl_info x, y;
  return dladdr(a, &x) && dladdr(b, &y) && x.dli_fbase == y.dli_fbase;
}

}  // namespace

bool AllocatorIsLibc() {
  const void* libc = reinterpret_cast<const void*>(mmap);
  return SameObject(reinterpret_cast<const void*>(malloc), libc) &&
         SameObject(reinterpret_cast<const void*>(free), libc) &&
         SameObject(reinterpret_cast<const void*>(calloc), libc) &&
         SameObject(reinterpret_cast<const void*>(realloc), libc);
}

void* BootstrapAlloc(size_t size, size_t alignment) {
  if (alignment < 16) alignment = 16;
  size_t used = g_arena_used.load(std::memory_order_relaxed);
  size_t start;
  do {
    start = (used + alignment - 1) & ~(alignment - 1);
    if (start + size > kBootstrapArenaBytes) return nullptr;
  } while (!g_arena_used.compare_exchange_weak(used, start + size));
  return g_bootstrap_arena + start;
}

void ForgetDlError() {
  dlerror();  // marks the message as read (after copying it)
  dlerror();  // frees a read message and its record
}

void EnsureResolved() {
  if (g_state.load(std::memory_order_acquire) == 2) return;
  int expected = 0;
  if (!g_state.compare_exchange_strong(expected, 1)) {
    // Re-entered through dlsym: the caller uses the bootstrap arena. Another thread: wait.
    if (t_resolving) return;
    while (g_state.load(std::memory_order_acquire) != 2) {}
    return;
  }
  t_resolving = true;
#define MEMLENS_RESOLVE(name, ret, params, args) \
  name = reinterpret_cast<ret(*) params>(dlsym(RTLD_NEXT, #name));
  MEMLENS_HOOKED_FUNCTIONS(MEMLENS_RESOLVE)
#undef MEMLENS_RESOLVE
  if (!malloc || !free || !calloc || !realloc || !mmap || !munmap) {
    static const char kMessage[] = "memlens: cannot find the C library's allocator; aborting\n";
    ::write(2, kMessage, sizeof kMessage - 1);
    ::abort();
  }
  t_resolving = false;
  g_state.store(2, std::memory_order_release);
}

}  // namespace memlens::agent::real
