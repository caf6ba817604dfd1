// src/windows/agent/thread_rings.h
//
// ThreadRings: the events of the Windows agent on their way from the hooks (application
// threads) to the writer thread. Each thread that allocates gets a ring of its own on its first
// event (mapped with VirtualAlloc, never from a heap), found through one TLS slot (TlsAlloc:
// `thread_local` in a DLL loaded at run time is what crashed Scalene's Windows port); rings are
// linked into one list the writer walks. The TLS slot also holds the recursion guard: the hooks
// record nothing while the thread is already inside the agent (the CRT's malloc calling
// HeapAlloc, the writer's own allocations).
//
// Runs on: application threads (Append, Guard), the writer thread (ForEachRing, Read/Consume).
// Hot-path rules apply to Append: no heap, no locks, no exceptions; a full ring waits at most
// 100 ms for the writer, then the event is dropped and counted. The last error
// (GetLastError) of the thread is left as it was: the program may read it after a malloc.
#pragma once

#include <windows.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "format/records.h"

namespace memlens::windows {

// One event as the ring holds it: this header, then frame_count return addresses, innermost
// first. `extra`: the heap handle of a HeapAlloc family event (0 for the CRT's functions, and
// for HeapCreate the heap's id is the address, its name's string id the size); for a custom
// heap's event from memlens.h, CustomHeapExtra (heap id, type name's string id).
struct RingEvent {
  uint64_t seq;
  uint64_t address;
  uint64_t size;
  uint64_t extra;
  uint8_t kind;  // format::EventKind
  uint8_t frame_count;
  uint8_t padding[6];
};
static_assert(sizeof(RingEvent) == 40);
inline constexpr int kMaxFrames = 120;
inline uint64_t CustomHeapExtra(uint32_t heap, uint32_t type) {
  return (uint64_t{heap} << 32) | type;
}
// Ids of custom heaps, memlens.h's and HeapCreate's alike: 1, 2, 3...
uint32_t NewHeapId();

struct ThreadRing {
  static constexpr size_t kBytes = 1 << 20;  // the ring's data, a power of two
  std::atomic<uint64_t> head{0};             // bytes written (producer)
  std::atomic<uint64_t> tail{0};             // bytes consumed (writer)
  std::atomic<bool> exited{false};           // the thread has ended: the writer frees the ring
  uint32_t index = 0;                        // the capture's thread index (kThread)
  uint32_t tid = 0;
  uint64_t stuck_round = ~uint64_t{0};  // producer's: the writer round it last waited out
  ThreadRing* next = nullptr;           // the list, newest first; only the writer unlinks
  uint64_t data[kBytes / 8];
};

// The unwind table entry of a return address, as RtlLookupFunctionEntry found it (function
// null: no table, the walk's end): a stack walk looks up the same few hundred addresses again
// and again, and Wine's lookup searches the module list under the loader's lock every time.
struct UnwindEntry {
  uint64_t ip;
  uint64_t image_base;
  void* function;  // PRUNTIME_FUNCTION
};

// Per thread, behind the TLS slot.
struct ThreadState {
  ThreadRing* ring = nullptr;
  int guard = 0;  // > 0: inside the agent, record nothing
  // Direct-mapped by address; emptied when a library was unloaded since (ModuleGeneration):
  // another may be loaded at the same addresses.
  static constexpr size_t kUnwindEntries = 1024;
  uint64_t unwind_generation = 0;
  UnwindEntry unwind[kUnwindEntries];
};

// Counts library unloads (the loader's notifications): the unwind caches' generation.
uint64_t ModuleGeneration();
void NoteModuleUnloaded();

// Sets up the TLS slot; false when Windows has none left (the agent then stays off).
bool InitThreadRings();
// The calling thread's state, created on first use; nullptr if it cannot be (no memory).
ThreadState* CurrentThreadState();
// The writer thread records nothing, ever.
void MarkAgentThread();
// DLL_THREAD_DETACH: the thread's ring is handed to the writer to drain and free; what the
// thread does after that is not recorded.
void RetireCurrentThread();
// The writer finished a cycle (producers facing a full ring wait again from now on).
void NoteWriterRound();

// Appends one event with a fresh sequence number; false when dropped: the ring stayed full for
// 100 ms, or is full and the writer has not finished a cycle since it last stayed full. A
// record never wraps: the ring's tail before it is skipped, with a filler record (kind 0,
// size: the bytes skipped) when there is room for one, and silently when less than a record
// header is left.
bool Append(ThreadState* state, format::EventKind kind, uint64_t address, uint64_t size,
            uint64_t extra, const uint64_t* frames, int frame_count);

// The writer's side.
ThreadRing* FirstRing();
// Unlinks and frees `ring` (drained and exited), given the ring before it (nullptr: the head).
void FreeRing(ThreadRing* ring, ThreadRing* previous);
// The sequence number the next event will get: also the count of events recorded so far.
uint64_t NextSeq();
uint64_t DroppedEvents();  // over the whole run
// The writer waits on it; a producer facing a full ring sets it.
HANDLE WriterWakeEvent();

// The recursion guard around the agent's own work on an application thread.
class Guard {
 public:
  explicit Guard(ThreadState* state) : state_(state) { ++state_->guard; }
  ~Guard() { --state_->guard; }
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;

 private:
  ThreadState* state_;
};

}  // namespace memlens::windows
