// src/agent/recorder/unwinder.h
//
// The unwinder: the native stack of an allocation, innermost first, our own frames cut off,
// expressed as the frames that changed since the thread's previous stack plus how many of
// that stack's outermost frames still hold.
//
// How (docs/unwinding.md has the measurements behind each choice):
// - Each frame is stepped with a FrameRule (frame_rules.h) read from the code's DWARF CFI and
//   cached by return address (per thread, behind one table for the process), so libc and libstdc++, built without frame pointers,
//   unwind as exactly as code with them. A frame the rules cannot step (a signal trampoline,
//   code without CFI, a CFA expression) hands the whole stack to libunwind's unw_backtrace.
// - The thread's previous stack is kept with each frame's stack pointer. The walk stops at the
//   first two consecutive frames whose (return address, stack pointer) equal two consecutive
//   frames of the previous stack (one, where that frame's CFA is rsp-based: it fixes the next
//   frame's stack pointer), once every return-address slot further out still holds the
//   address seen there last time (one load per frame). An activation that returned and was
//   replaced by a call from elsewhere rewrites its return-address slot, so the stale part is
//   never reused; the walk then looks for a match further out than the replaced frame. Left
//   open: code with a variable-size frame (alloca, VLA) whose CFA is rbp-based, re-entered at
//   the same inner stack pointer from a different depth, with its old return address still
//   intact in stale memory at the old location.
// - No depth limit short of kMaxStackFrames (a million frames, more than an 8 MiB stack can
//   hold); the per-thread arrays start small and double on demand.
//
// Runs on: application threads (CaptureStack, CommitStack: hot-path rules apply: no heap, no
// locks; raw mmap/munmap only when a thread's deepest stack doubles). NewUnwindState once per
// ring. Not thread-safe: a state belongs to the thread that owns its ring.
#pragma once

#include <atomic>
#include <cstdint>

namespace memlens::agent {

inline constexpr uint32_t kMaxStackFrames = uint32_t{1} << 20;

struct UnwindState;

struct CapturedStack {
  const uint64_t* fresh = nullptr;  // return addresses that changed, innermost first
  uint32_t fresh_count = 0;
  uint32_t kept = 0;  // then the outermost `kept` frames of the previous committed stack
  bool truncated = false;  // deeper than kMaxStackFrames: the outermost frames are missing
  bool matchable = false;  // fresh_sp is valid: the next capture may reuse this one
};

// Our own code's executable ranges, whose frames no stack includes: the agent's (found by
// InitializeRecorder) and the Python hooks library's, when one is attached (AddSelfRange).
extern uintptr_t g_self_begin[2];
extern uintptr_t g_self_end[2];
void AddSelfRange(uintptr_t begin, uintptr_t end);
inline bool IsOwnCode(uintptr_t ip) {
  return (ip >= g_self_begin[0] && ip < g_self_end[0]) ||
         (ip >= g_self_begin[1] && ip < g_self_end[1]);
}

// Once per process, before the first capture: libunwind's per-thread cache (no global lock).
void InitializeUnwinder();
// Maps a new state (raw mmap); nullptr when no memory can be mapped.
UnwindState* NewUnwindState();
// Forgets the previous stack: a new thread takes the ring (and the writer forgets it too).
void ResetUnwindState(UnwindState* state);

// Captures the calling thread's stack. The result points into `state` and stays valid until
// the next call. kept refers to the stack of the last CommitStack.
void CaptureStack(UnwindState* state, CapturedStack* out);
// Python-lines-only mode (docs/python.md): the one frame that called into our code (the
// interposed function's caller), kept 0, not matchable; no frame when even that cannot be
// stepped to. Costs the agent's own frames, no walk of the program's.
void CaptureCaller(UnwindState* state, CapturedStack* out);
// The captured stack was published: the next capture is relative to it. A capture that was
// dropped is simply not committed, so the agent's and the writer's previous stacks agree.
void CommitStack(UnwindState* state, const CapturedStack& stack);

// Bumped when code is unmapped (dlclose): cached rules and previous stacks are forgotten.
extern std::atomic<uint32_t> g_code_generation;

}  // namespace memlens::agent
