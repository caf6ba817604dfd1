// src/agent/hooks/real_functions.h
//
// Pointers to the definitions our interposers stand in front of (libc's malloc, ...), resolved
// once with dlsym(RTLD_NEXT). dlsym itself may allocate: while resolution runs, malloc and
// friends are served from a small static arena (IsBootstrapPointer tells its blocks apart).
//
// Runs on: any thread, from the first interposed call on. EnsureResolved is idempotent.
#pragma once

#include <cstdint>

#include "agent/hooks/hooked_functions.h"

namespace memlens::agent::real {

#define MEMLENS_DECLARE_REAL(name, ret, params, args) extern ret(*name) params;
MEMLENS_HOOKED_FUNCTIONS(MEMLENS_DECLARE_REAL)
#undef MEMLENS_DECLARE_REAL

void EnsureResolved();

// True when the real malloc, free, calloc and realloc are defined in the object that defines
// the real mmap: the C library's allocator, whose own work calls none of our hooks. False when
// the program brings its own allocator or one is preloaded after us. After EnsureResolved.
bool AllocatorIsLibc();
void* BootstrapAlloc(size_t size, size_t alignment);

// After the agent's own dlsym calls, some of which fail by design (a symbol looked for that the
// process lacks): each failure leaves its message in the thread's dlerror state, in blocks the
// C library mallocs while we record nothing. Left there, the program's next dlopen/dlsym/dlerror
// would free them (frees of blocks the capture never saw made) and its dlerror() could return
// our message. Reading the error twice frees them now, in the context that made them.
void ForgetDlError();

// Inline: every interposed call asks one of these first.
extern thread_local constinit bool t_resolving;  // this thread is inside dlsym (EnsureResolved)
inline constexpr size_t kBootstrapArenaBytes = 64 * 1024;
extern char g_bootstrap_arena[kBootstrapArenaBytes] __attribute__((visibility("hidden")));

// This thread is inside dlsym: allocate from the bootstrap arena.
inline bool Resolving() { return t_resolving; }
inline bool IsBootstrapPointer(const void* ptr) {
  return reinterpret_cast<uintptr_t>(ptr) - reinterpret_cast<uintptr_t>(g_bootstrap_arena) <
         kBootstrapArenaBytes;
}

}  // namespace memlens::agent::real
