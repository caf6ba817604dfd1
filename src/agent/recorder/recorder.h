// src/agent/recorder/recorder.h
//
// The recorder: what the interposers call to log an allocation or a release, and the state that
// application threads and the writer thread share.
//
// Runs on: application threads (Record*), the writer thread (the Writer* functions).
// Hot-path rules (docs/hot-path-rules.md): no heap, no blocking locks, no stdio, no exceptions.
// The only waits are bounded: a full buffer waits for the writer while it makes progress, then
// the event is dropped and counted.
//
// Ordering: every event takes a number from one global sequence after its record has room, so
// sequence numbers are dense. A release is recorded before the real free/munmap, an allocation
// after the real malloc returns, so an address is always seen released before it is seen reused.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "agent/recorder/unwinder.h"
#include "format/records.h"

namespace memlens::agent {

enum AgentState : int {
  kUninitialized = 0,  // no interposed call seen yet
  kRecording = 1,      // events go to thread buffers
  kPassive = 2,        // not this process's job to record (a child, or no output): pass through
  kStopped = 3,        // recording finished (exit, exec, fatal signal, error): pass through
  kDormant = 4,        // loaded without memlens run: pass through until memlens_start (agent.h)
};

extern std::atomic<int> g_state;
// This thread is inside the agent: don't record. constinit: read without a TLS wrapper call.
extern thread_local constinit bool t_in_hook;

// Sets up the recorder (own code range, thread-exit key, unwinder caching). Once, from
// InitializeOnce.
void InitializeRecorder();

// Called from every interposer before anything else: resolves real functions and decides,
// once per process, whether to record.
void InitializeOnce();

// Sets the agent's own executable range (g_self_begin[0], g_self_end[0]: unwinder.h) from our
// ELF header: no lock, no system call, safe at the very first allocation. Idempotent.
void FindSelfRange();

// caller: the return address of the interposed call. Calls made by the agent's own code (the
// C++ runtime linked into it, say) are never the program's allocations.
inline bool ShouldRecord(const void* caller) {
  return g_state.load(std::memory_order_relaxed) == kRecording && !t_in_hook &&
         !IsOwnCode(reinterpret_cast<uintptr_t>(caller));
}

// RAII: marks the thread as inside the agent, so allocations we cause are not recorded. It may
// nest (a call the agent does not record runs under one too): it puts back what it found.
class HookGuard {
 public:
  HookGuard() : was_in_hook_(t_in_hook) { t_in_hook = true; }
  ~HookGuard() { t_in_hook = was_in_hook_; }
  HookGuard(const HookGuard&) = delete;
  HookGuard& operator=(const HookGuard&) = delete;

 private:
  bool was_in_hook_;
};

// All must be called under a HookGuard. RecordAlloc and RecordAnnotated capture the caller's
// stack; RecordRelease records no stack (also used for the API's markers and heap resets).
void RecordAlloc(format::EventKind kind, const void* address, size_t size);
void RecordRelease(format::EventKind kind, const void* address, size_t size);
// A custom heap's block event (HasAnnotationWord): `annotation` (heap id << 32 | type string
// id) travels in the first word after the RawEvent, before the frames (raw_event.h).
void RecordAnnotated(format::EventKind kind, const void* address, size_t size,
                     uint64_t annotation);

// Counters for the END record and the summary.
void CountDroppedEvent();  // an event left out for want of room (or of a sampling-table slot)
uint64_t EventsRecorded();
uint64_t TakeDroppedEvents();  // since the last call
uint64_t DroppedEventsTotal();
// Children started by fork, posix_spawn or posix_spawnp (not vfork, nor glibc's own spawns in
// system and popen): none is recorded.
void CountUnrecordedChild();
uint64_t UnrecordedChildren();

// --- shared with the writer thread ---
extern std::atomic<uint64_t> g_seq;            // next sequence number
extern std::atomic<bool> g_writer_running;
// futex wake on g_control->wake (writer.h); its rounds: g_control->rounds. A writer whose start
// was deferred (DeferWriterStart) is started first.
void WakeWriter();
// The same for a writer that runs: a deferred one is not started by it.
void WakeRunningWriter();
// A forked child's writer starts only when needed (agent.cc, RecordForkedChild): `start` runs
// once, at the first of StartDeferredWriter (WakeWriter calls it) and CancelDeferredWriter.
void DeferWriterStart(void (*start)());
void StartDeferredWriter();
bool CancelDeferredWriter();  // true when a start was pending, and now will not happen
// Bumped at the start of each span (agent.h): a thread's first stack in it is sent whole, since
// the new capture knows none of the stacks before.
extern std::atomic<uint32_t> g_span_epoch;
// A new capture: the sequence and the counters of its END record start again from zero. Only
// while nothing records.
void ResetRecorderCounters();
// In a child just forked: every thread's buffer is let go (ForgetThreadBuffersAfterFork,
// thread_buffer.h), and the calling thread takes a new one at its next event.
void ForgetBuffersAfterFork();

}  // namespace memlens::agent
