// src/agent/hooks/allocation_paths.h
//
// malloc's and free's two paths, shared by the C interposers (interposers.cc) and C++'s
// operator new and delete (cxx_interposers.cc). Each entry point passes the return address of
// its own caller, so that the caller check (recorder.h: the agent's own calls are never
// recorded) and the stack see the program's code, not the interposer that forwarded the call.
//
// The inline part is sampling's direct path (sampler.h): a jump to the real function with no
// frame of the caller's own. The full path is out of line, in interposers.cc.
//
// Runs on: application threads. Hot-path rules apply (docs/hot-path-rules.md).
#pragma once

#include <cstddef>

#include "agent/hooks/real_functions.h"
#include "agent/recorder/sampler.h"

namespace memlens::agent::hooks {

// Record (or not) and allocate; the full paths of malloc, free and the aligned allocation of
// C++'s aligned operator new (recorded as aligned_alloc, with the size asked for).
__attribute__((noinline)) void* MallocFull(const void* caller, size_t size);
__attribute__((noinline)) void FreeFull(const void* caller, void* ptr);
__attribute__((noinline)) void* AlignedFull(const void* caller, size_t alignment, size_t size);

inline void* MallocFrom(const void* caller, size_t size) {
  if (g_direct_short_path && PassesUnsampled(size)) return real::malloc(size);
  return MallocFull(caller, size);
}

inline void FreeFrom(const void* caller, void* ptr) {
  if (!ptr || real::IsBootstrapPointer(ptr)) return;
  if (g_direct_short_path && ReleasesUnsampled(ptr)) return real::free(ptr);
  FreeFull(caller, ptr);
}

}  // namespace memlens::agent::hooks
