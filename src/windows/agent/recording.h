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

#include "format/records.h"
#include "windows/agent/agent.h"
#include "windows/agent/thread_rings.h"

namespace memlens::windows {

// The stack of the entry point's caller, innermost first: the frames of CaptureStack and the
// entry point are skipped (x64 Windows code has no frame pointers: RtlCaptureStackBackTrace unwinds
// with the modules' .pdata tables). The walk may go on past the thread's first frame into what is
// left on the stack: it is cut at the first frame that cannot be code (below 64 KiB, never mapped
// on Windows).
inline __attribute__((noinline)) int CaptureStack(uint64_t* frames) {
  const int n = RtlCaptureStackBackTrace(2, kMaxFrames, reinterpret_cast<void**>(frames), nullptr);
  for (int i = 0; i < n; ++i) {
    if (frames[i] < 0x10000) return i;
  }
  return n;
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
  const int count = with_stack ? CaptureStack(frames) : 0;
  Append(state, kind, address, size, extra, frames, count);
  SetLastError(error);
}

}  // namespace memlens::windows
