// src/windows/agent/recording.h
//
// What every entry point of the Windows agent does to record one call: the hooks
// (hooks.cc) and the instrumentation API of memlens.h (api.cc). Entering says whether this
// call is to be recorded (recording, and not already inside the agent on this thread); Record
// appends one event with the caller's stack and leaves the thread's last error as it was.
//
// Runs on: application threads. Hot-path rules apply (thread_rings.h).
#pragma once

#include <windows.h>

#include <cstdint>
#include <cstring>

#include "format/records.h"
#include "windows/agent/agent.h"
#include "windows/agent/thread_rings.h"

namespace memlens::windows {

// The stack of the entry point's caller, innermost first (CaptureStack's and the entry
// point's frames skipped), unwound with the modules' .pdata tables (x64 code has no frame
// pointers). The walk stops at the first frame with no unwind table: code outside any PE
// module, such as Wine's own thread start. RtlCaptureStackBackTrace went on into such code
// through Wine's Linux-side unwinder, which made every allocation 36 times slower under Wine
// (docs/benchmarks.md); a leaf function, the one kind of PE code without a table, is never
// an outer frame (it calls nothing).
inline PRUNTIME_FUNCTION LookupFunction(ThreadState* state, DWORD64 ip, DWORD64* image_base) {
  const uint64_t generation = ModuleGeneration();
  if (state->unwind_generation != generation) {
    std::memset(state->unwind, 0, sizeof state->unwind);
    state->unwind_generation = generation;
  }
  UnwindEntry& entry = state->unwind[((ip >> 4) ^ (ip >> 14)) % ThreadState::kUnwindEntries];
  if (entry.ip != ip) {
    DWORD64 base = 0;
    entry.function = RtlLookupFunctionEntry(ip, &base, nullptr);
    entry.image_base = base;
    entry.ip = ip;
  }
  *image_base = entry.image_base;
  return static_cast<PRUNTIME_FUNCTION>(entry.function);
}

inline __attribute__((noinline)) int CaptureStack(ThreadState* state, uint64_t* frames) {
  CONTEXT context;
  RtlCaptureContext(&context);
  int count = 0;
  for (int step = 0; count < kMaxFrames; ++step) {
    DWORD64 image_base = 0;
    PRUNTIME_FUNCTION function = LookupFunction(state, context.Rip, &image_base);
    if (function == nullptr) break;
    void* handler_data = nullptr;
    DWORD64 frame = 0;
    RtlVirtualUnwind(UNW_FLAG_NHANDLER, image_base, context.Rip, function, &context, &handler_data,
                     &frame, nullptr);
    if (context.Rip < 0x10000) break;             // the end of the stack (never mapped)
    if (step > 0) frames[count++] = context.Rip;  // step 0: the entry point's own frame
  }
  return count;
}

// The thread's state when this call is to be recorded, else nullptr.
inline ThreadState* Entering() {
  if (!Recording()) return nullptr;
  ThreadState* state = CurrentThreadState();
  return state && state->guard == 0 ? state : nullptr;
}

// Records one event; with_stack captures the stack of the entry point's caller. `extra`: a Windows
// heap's handle, or a custom heap's annotation (thread_rings.h). Keeps the last error.
__attribute__((always_inline)) inline void Record(ThreadState* state, format::EventKind kind,
                                                  uint64_t address, uint64_t size, uint64_t extra,
                                                  bool with_stack) {
  const DWORD error = GetLastError();
  Guard guard(state);
  uint64_t frames[kMaxFrames];
  const int count = with_stack ? CaptureStack(state, frames) : 0;
  Append(state, kind, address, size, extra, frames, count);
  SetLastError(error);
}

}  // namespace memlens::windows
