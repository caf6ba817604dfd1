// src/agent/hooks/real_functions.h
//
// Pointers to the definitions our interposers stand in front of (libc's malloc, ...), resolved
// once with dlsym(RTLD_NEXT). dlsym itself may allocate: while resolution runs, malloc and
// friends are served from a small static arena (IsBootstrapPointer tells its blocks apart).
//
// Runs on: any thread, from the first interposed call on. EnsureResolved is idempotent.
#pragma once

#include "agent/hooks/hooked_functions.h"

namespace memlens::agent::real {

#define MEMLENS_DECLARE_REAL(name, ret, params, args) extern ret(*name) params;
MEMLENS_HOOKED_FUNCTIONS(MEMLENS_DECLARE_REAL)
#undef MEMLENS_DECLARE_REAL

void EnsureResolved();
bool Resolving();  // this thread is inside dlsym: allocate from the bootstrap arena
void* BootstrapAlloc(size_t size, size_t alignment);
bool IsBootstrapPointer(const void* ptr);

}  // namespace memlens::agent::real
